"""What an eval directory holds and what is left to run in it: the resume rule and the change check.

``eval.json`` in the eval's directory names its run in the store and fingerprints what was asked (tasks,
checkpoints, harnesses, attempts, sampling, rewards). Rerunning the command runs, per task and cell, only the
attempts still missing: ``attempts`` scored ones are wanted, and attempts that ended as infra are replaced,
at most ``infra_retries`` times. Nothing scored is ever run again. A fingerprint that differs is refused with
what changed: figures over a mix of two task sets or two configs would be read as one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.evaluation.config import BASE
from harnessrl.evaluation.figures import Attempt
from harnessrl.weights.checkpoints import latest_checkpoint

MANIFEST = "eval.json"


class EvalChanged(ValueError):
    """The eval directory was run with other tasks or settings than this command asks for."""


@dataclass(frozen=True)
class Checkpoint:
    """A policy under evaluation: its label in the figures and its folder (None: the base model)."""

    label: str
    path: Path | None


def resolve_checkpoint(spec: str, base_dir: Path) -> Checkpoint:
    """``base``, a checkpoint folder, or a run directory (its newest checkpoint), relative to ``base_dir``."""
    if spec == BASE:
        return Checkpoint(BASE, None)
    path = Path(spec).expanduser()
    path = path if path.is_absolute() else (base_dir / path).resolve()
    if (path / "checkpoints").is_dir():  # a run directory: its newest trained step
        newest = latest_checkpoint(path)
        if newest is None:
            raise FileNotFoundError(f"checkpoint {spec!r}: the run directory {path} has no trained step yet")
        return Checkpoint(f"{path.name}/{newest.name}", newest)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {spec!r}: no such folder ({path}); give \"base\", a checkpoint "
                                "folder (runs/x/checkpoints/step_N) or a run directory")
    return Checkpoint(f"{path.parent.parent.name}/{path.name}" if path.parent.name == "checkpoints" else path.name,
                      path)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def folder_identity(path: Path | None) -> str:
    """A checkpoint folder's identity: its files' names and sizes, and the content of the small ones (the
    config and trainer state a retrained step rewrites). Cheap enough for multi-GB folders."""
    if path is None:
        return BASE
    parts: list[Any] = [str(path)]
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        size = f.stat().st_size
        parts.append([str(f.relative_to(path)), size,
                      hashlib.sha256(f.read_bytes()).hexdigest() if size <= 1 << 20 else None])
    return _digest(parts)


def fingerprint(*, tasks: Mapping[str, Any], checkpoints: Sequence[Checkpoint], harnesses: Mapping[str, Any],
                settings: Mapping[str, Any]) -> dict[str, Any]:
    """What the figures depend on, each part small and comparable: task inputs and references by digest,
    checkpoint folders by identity, harness runners and settings as given."""
    return {
        "tasks": {t: _digest(v) for t, v in tasks.items()},
        "checkpoints": {c.label: folder_identity(c.path) for c in checkpoints},
        "harnesses": {h: _digest(v) for h, v in harnesses.items()},
        "settings": {k: _digest(v) for k, v in settings.items()},
    }


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two fingerprints, in words (empty: the same eval)."""
    out: list[str] = []
    for part in ("tasks", "checkpoints", "harnesses", "settings"):
        a, b = old.get(part, {}), new.get(part, {})
        added = sorted(set(b) - set(a))
        removed = sorted(set(a) - set(b))
        changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
        for what, names in (("added", added), ("removed", removed), ("changed", changed)):
            if names:
                shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                out.append(f"{part} {what}: {shown}")
    return out


def open_manifest(eval_dir: Path, print_: Mapping[str, Any], new_run_id: str) -> str:
    """The eval's run id: the one ``eval.json`` names when it fingerprints the same eval (resume), else a
    new eval there. A different eval in the same directory is refused with what changed."""
    path = eval_dir / MANIFEST
    if path.is_file():
        saved = json.loads(path.read_text())
        diff = changes(saved.get("fingerprint", {}), print_)
        if diff:
            raise EvalChanged(f"{eval_dir} holds an eval of other tasks or settings ({'; '.join(diff)}): run it "
                              f"with the config it was made with, or give another directory (--run-dir)")
        return str(saved["run_id"])
    eval_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": new_run_id, "fingerprint": print_}, indent=1))
    tmp.replace(path)
    return new_run_id


def still_needed(attempts: Sequence[Attempt], *, wanted: int, infra_retries: int) -> int:
    """How many attempts one task of one cell still needs: ``wanted`` that ended other than infra, with at
    most ``infra_retries`` replacements for those that did. Attempts the eval's own stop interrupted are
    replaced outside that bound (a killed eval is not the task's fault). Never negative; nothing scored reruns."""
    finished = sum(not a.infra for a in attempts)
    counted = sum(not a.interrupted for a in attempts)
    budget = wanted + infra_retries - counted  # launches left under the cap
    return max(0, min(wanted - finished, budget))
