"""What a run directory adds to the store: per-step trainer metrics and step/evaluation events.

The store knows rollouts, calls and rewards; the run directory (``harnessrl train``) holds
``metrics.jsonl`` (one object per trained step), ``events.jsonl`` (``step``, ``sft_step``, ``step_failed``
and ``eval`` events, the last with the held-out reward) and ``run.json`` naming the run. The dashboard reads them when it can find them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.types import Run

log = logging.getLogger(__name__)


@dataclass
class RunFiles:
    """Step metrics and events of one run (empty when its run directory is unknown)."""

    dir: Path | None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def _events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self._events("step")

    @property
    def sft_steps(self) -> list[dict[str, Any]]:
        return self._events("sft_step")

    @property
    def evals(self) -> list[dict[str, Any]]:
        return self._events("eval")

    @property
    def failures(self) -> list[dict[str, Any]]:
        return self._events("step_failed")

    def metric_names(self) -> list[str]:
        """Numeric trainer metrics in the order they first appear (``step`` and the ``eval/`` rows the
        controller mirrors there excluded: the reward chart shows the held-out curve)."""
        names: dict[str, None] = {}
        for row in self.metrics:
            for k, v in row.items():
                if k != "step" and not k.startswith("eval/") and _number(v) is not None:
                    names.setdefault(k)
        return list(names)

    def series(self, name: str) -> list[tuple[float, float]]:
        """``(step, value)`` points of one trainer metric, skipping missing and non-finite values."""
        points = []
        for row in self.metrics:
            x, y = _number(row.get("step")), _number(row.get(name))
            if x is not None and y is not None:
                points.append((x, y))
        return points

    def train_reward(self) -> list[tuple[float, float]]:
        return [(x, y) for e in self.steps
                if (x := _number(e.get("step"))) is not None and (y := _number(e.get("reward_mean"))) is not None]

    def held_out_reward(self) -> list[tuple[float, float]]:
        """Held-out mean reward per evaluation, at x = its policy version (= steps trained); from
        ``events.jsonl``, else the ``eval/reward_mean`` rows of ``metrics.jsonl``."""
        if not self.evals:
            return self.series("eval/reward_mean")
        return [(x, y) for e in self.evals
                if (x := _number(e.get("policy_version"))) is not None
                and (y := _number(e.get("mean_reward"))) is not None]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            if isinstance(row, dict):
                rows.append(row)
    return rows


def _names_run(d: Path, run_id: str) -> bool:
    try:
        return bool(json.loads((d / "run.json").read_text())["run_id"] == run_id)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def find_run_dir(run: Run, candidates: Sequence[Path], store_url: str | None = None) -> Path | None:
    """The run directory of ``run``: a candidate whose ``run.json`` names it, else its config's ``run.dir``
    (when absolute), else the folder of a SQLite store, else a lone candidate without ``run.json``."""
    options = list(candidates)
    configured = (run.config.get("run") or {}).get("dir") if isinstance(run.config, dict) else None
    if isinstance(configured, str) and Path(configured).is_absolute():
        options.append(Path(configured))
    if store_url and store_url.startswith("sqlite:///") and ":memory:" not in store_url:
        options.append(Path(store_url.removeprefix("sqlite:///").split("?")[0]).parent)
    for d in options:
        if _names_run(d, run.id):
            return d
    loose = [d for d in candidates if d.is_dir() and not (d / "run.json").exists()]
    return loose[0] if len(loose) == 1 else None


def load_run_files(run_dir: Path | None) -> RunFiles:
    if run_dir is None:
        return RunFiles(None)
    return RunFiles(dir=run_dir, metrics=_read_jsonl(run_dir / "metrics.jsonl"),
                    events=_read_jsonl(run_dir / "events.jsonl"))
