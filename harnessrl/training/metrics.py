"""Step metrics to ``<run_dir>/metrics.jsonl`` (one object per step) and TensorBoard (``<run_dir>/tb``).

JSONL is the source of truth the dashboard reads; TensorBoard is for people who already use it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsWriter:
    """Appends one JSON line per step and mirrors numeric values to TensorBoard."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"))

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **{k: _jsonable(v) for k, v in metrics.items()}}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
