"""Step metrics to ``<run_dir>/metrics.jsonl`` (one object per step), mirrored to experiment trackers.

JSONL is the source of truth the dashboard reads; TensorBoard, W&B and MLflow (``trackers``) are for
people who already use them. A tracker that fails while logging is warned about once and training goes
on: losing a chart must not cost a training run.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harnessrl.training.trackers import Tracker, scalars

logger = logging.getLogger(__name__)


class MetricsWriter:
    """Appends one JSON line per step and mirrors its finite numbers to ``trackers`` (closed with it)."""

    def __init__(self, run_dir: str | Path, trackers: Sequence[Tracker] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self.trackers = list(trackers)
        self._failed: set[str] = set()

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **{k: _jsonable(v) for k, v in metrics.items()}}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        values = scalars(metrics)
        for tracker in self.trackers:
            self._guard(tracker, "log", tracker.log, step, values)

    def close(self, failed: bool = False) -> None:
        for tracker in self.trackers:
            self._guard(tracker, "close", tracker.close, failed)
        self.trackers = []

    def _guard(self, tracker: Tracker, what: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            first = tracker.name not in self._failed
            self._failed.add(tracker.name)
            logger.log(logging.WARNING if first else logging.DEBUG,
                       "%s %s failed (%s: %s); training goes on%s", tracker.name, what, type(exc).__name__,
                       exc, ", later failures of this tracker are logged at DEBUG" if first else "")


def summed(metrics: Mapping[str, Any], key: str) -> float:
    """``key`` of a step's metrics, or over ``[policies]`` (one trainer each) the sum of
    ``policy/<name>/<key>``: what the step line and a run's cost read."""
    if key in metrics:
        return float(metrics[key])
    return sum(float(v) for k, v in metrics.items() if k.startswith("policy/") and k.endswith(f"/{key}"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
