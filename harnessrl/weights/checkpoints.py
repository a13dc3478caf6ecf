"""Where a run keeps its checkpoints: ``<run_dir>/checkpoints/step_NNNNNN``, one folder per trained step.

The one module that builds or parses that folder name. A folder is written under ``.tmp`` and renamed at
once (``save_checkpoint_atomic``), so a step is trained iff its folder exists and a killed run never leaves
a half checkpoint that ``latest_checkpoint`` would resume from. ``prune_checkpoints`` keeps a run's newest
few (``[run] keep_checkpoints``): a full fine-tune writes weights and optimizer state each step (~1.6 GB for a
135M model in fp32), which fills a disk in a few dozen steps. Light on purpose (no torch): ``harnessrl
train`` finds where to resume before it loads a model.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Protocol

FOLDER = "checkpoints"
_NAME = re.compile(r"step_(\d+)")


class Checkpointable(Protocol):
    """What ``save_checkpoint_atomic`` needs of a trainer."""

    def save_checkpoint(self, path: Path) -> Path: ...


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """The folder of ``step``'s checkpoint (``checkpoints/step_000012``; zero-padded so names sort)."""
    return Path(run_dir) / FOLDER / f"step_{step:06d}"


def checkpoint_step(checkpoint: Path | None) -> int:
    """The step a checkpoint folder holds; 0 for none (the trained-step watermark on resume)."""
    if checkpoint is None:
        return 0
    m = _NAME.fullmatch(Path(checkpoint).name)
    if m is None:
        raise ValueError(f"{checkpoint} is not a checkpoint folder (expected a name like step_000012)")
    return int(m.group(1))


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint folder of a run, if any (``.tmp`` folders are half-written)."""
    root = Path(run_dir) / FOLDER
    if not root.is_dir():
        return None
    done = [p for p in root.iterdir() if p.is_dir() and _NAME.fullmatch(p.name)]
    return max(done, key=checkpoint_step) if done else None


def save_checkpoint_atomic(trainer: Checkpointable, run_dir: Path, step: int) -> Path:
    """Write ``step``'s folder via a temporary folder and one rename: a step is trained iff it exists."""
    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    trainer.save_checkpoint(tmp)
    tmp.rename(final)
    return final


def prune_checkpoints(run_dir: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` complete checkpoint folders of a run; returns what was deleted."""
    return prune_numbered(Path(run_dir) / FOLDER, _NAME, keep)


def prune_numbered(root: str | Path, name: re.Pattern[str], keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` folders under ``root`` whose name ``name`` matches in full, by the
    number its one group captures; returns what was deleted (``policies/vN`` uses it too).

    The newest is never deleted (``keep`` >= 1): it is what a restarted run resumes from. Folders are removed
    oldest first, so a kill midway still leaves the newest ones.
    """
    if keep < 1:
        raise ValueError(f"keep_checkpoints must be at least 1 (the newest is what a run resumes from), not {keep}")
    root = Path(root)
    if not root.is_dir():
        return []
    numbered = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := name.fullmatch(p.name))]
    old = [p for _, p in sorted(numbered)[:-keep]]
    for path in old:
        shutil.rmtree(path)
    return old
