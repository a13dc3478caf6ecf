"""The run config of this folder's example (``agent.py``, ``verify.py``, ``train.jsonl``, ``eval.jsonl``) as a
``run_config`` layer: the tests of the loop write it with ``write_run_config``, plus a layer of their own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from run_config import TINY_ENGINE, TINY_LORA

HERE = Path(__file__).resolve().parent


def loop_config(tmp_path: Path, *, steps: int = 2, train: str = "train.jsonl", attempts: int = 2) -> dict[str, Any]:
    """Two tasks a step on the tiny model, scored by ``verify.py`` (``protected.txt`` must stay as it was)."""
    return {
        "run": {"name": "loop", "dir": str(tmp_path / "run"), "steps": steps, "tasks_per_step": 2,
                "attempts_per_task": attempts},
        "tasks": {"train": str(HERE / train), "eval": str(HERE / "eval.jsonl")},
        "engine": dict(TINY_ENGINE),
        "runner": {"command": [sys.executable, str(HERE / "agent.py")], "concurrency": 8, "timeout_s": 60},
        "rewards": {"verifier": [sys.executable, str(HERE / "verify.py")], "protected": ["protected.txt"]},
        "training": {"lr": 1e-3, "lora": dict(TINY_LORA)},
    }
