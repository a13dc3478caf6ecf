"""The examples/swe task records as the tests write them into their own tasks file."""

from __future__ import annotations

import json
from pathlib import Path

SWE = Path(__file__).resolve().parents[3] / "examples" / "swe"


def swe_task(task_id: str) -> dict:
    """Task ``task_id`` of examples/swe, its workspace and hidden tests made absolute (the test's tasks
    file lives in a temporary folder, where the relative paths would not resolve)."""
    for name in ("train.jsonl", "eval.jsonl"):
        for line in (SWE / "tasks" / name).read_text().splitlines():
            record = json.loads(line)
            if record["id"] == task_id:
                for key in ("workspace", "hidden_dir"):
                    record[key] = str(SWE / "tasks" / record[key])
                return record
    raise KeyError(f"no task {task_id!r} in examples/swe/tasks")
