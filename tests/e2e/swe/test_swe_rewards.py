"""The swe tasks' reward path through ``harnessrl collect`` (controller, local runner, verifier, guards),
with a scripted agent instead of a model: a fix scores 1, doing nothing 0, touching a test file 0 with a
``tamper`` record, and the hidden tests arrive only after the agent exits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from run_config import TINY_ENGINE, write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store
from harnessrl.types import FailureKind, RolloutStatus

from ._tasks import SWE, swe_task

HERE = Path(__file__).resolve().parent


def test_fix_nothing_and_tampering_are_scored(tmp_path: Path) -> None:
    base = swe_task("swe-slugify")
    lines = []
    for mode in ("fix", "nothing", "tamper", "hidden"):
        lines.append(json.dumps({
            **base, "id": f"{mode}", "input": {"mode": mode, "solution": str(SWE / "tasks/slugify/solution")}}))
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    cfg = write_run_config(tmp_path, {
        "run": {"dir": str(tmp_path / "run")},
        "tasks": {"eval": "tasks.jsonl"},
        "engine": TINY_ENGINE,
        "runner": {"command": [sys.executable, str(HERE / "scripted_agent.py")], "concurrency": 4, "timeout_s": 60,
                   "keep_workdirs": "all",
                   "sandbox_read_only": [str(SWE / "tasks/slugify/solution")]},  # the scripted agent copies the fix
        "rewards": {"verifier": [sys.executable, str(SWE / "verify.py")]},
    })
    config = load_config(cfg)
    result = run_collect(config, None)
    assert result.tasks == 4
    store = open_store(config.store_url)
    by_task = {r.task_id: r for r in store.list_rollouts(limit=10)}
    rewards = {t: {x.name: x.value for x in store.get_rewards(r.id)} for t, r in by_task.items()}
    assert rewards["fix"] == {"verifier": 1.0, "final": 1.0}
    assert rewards["nothing"] == {"verifier": 0.0, "final": 0.0}
    for t in ("tamper", "hidden"):
        assert rewards[t] == {"tamper": 0.0, "final": 0.0}, t
        assert by_task[t].status == RolloutStatus.FAILED and by_task[t].failure_kind == FailureKind.AGENT
    assert "modified: tests/test_textkit.py" in by_task["tamper"].error
    assert "added: tests/test_hidden_slugify.py" in by_task["hidden"].error
    store.close()
