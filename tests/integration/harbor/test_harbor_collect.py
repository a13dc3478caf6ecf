"""One collection over Harbor tasks through the whole stack (tiny engine, gateway, controller, local runner,
scoring): the example's oracle config scores every task 1, and a harness that asks the model with the
instruction and does nothing is recorded call for call and scores 0, in the sandbox where there is one.
About 3 s each on 2 cores."""

from __future__ import annotations

import sys
from pathlib import Path

from run_config import TINY_ENGINE, write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store
from harnessrl.types import RolloutStatus, TaskSplit

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[2] / "examples" / "harbor"


def test_the_oracle_config_scores_every_example_task_1(tmp_path: Path) -> None:
    config = load_config(EXAMPLE / "oracle.toml", {"run": {"dir": str(tmp_path / "run")}})
    result = run_collect(config, None, TaskSplit.TRAIN)
    assert result.tasks == 3 and result.mean_reward == 1.0
    assert result.rewards == {"count-errors": 1.0, "fix-mean": 1.0, "write-greeting": 1.0}


def test_a_model_harness_gets_the_instruction_and_its_calls_are_recorded(tmp_path: Path) -> None:
    config = load_config(write_run_config(tmp_path, {
        "run": {"dir": str(tmp_path / "run")},
        "tasks": {"train": str(EXAMPLE / "tasks")},
        "engine": dict(TINY_ENGINE),
        "runner": {"command": [sys.executable, str(HERE / "agent.py")], "timeout_s": 60},
    }))
    result = run_collect(config, None, TaskSplit.TRAIN)
    assert result.tasks == 3 and result.mean_reward == 0.0
    store = open_store(config.store_url)
    try:
        rollouts = store.list_rollouts(limit=100)
        assert len(rollouts) == 3
        for r in rollouts:
            assert r.status == RolloutStatus.SUCCEEDED, r.error
            assert {x.name: x.value for x in store.get_rewards(r.id)} == {"verifier": 0.0, "final": 0.0}
            calls = store.get_calls(r.id)
            assert len(calls) == 1 and calls[0].completion_token_ids
            assert calls[0].request["messages"][0]["content"] == r.input["instruction"]
            assert "/app" not in r.input["instruction"]
            assert "environment/Dockerfile not built; ran on the host" in (r.logs or "")
    finally:
        store.close()
