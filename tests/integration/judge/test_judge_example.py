"""examples/judge as a user runs it, with only the models swapped for scripted ones: the policy engine
answers one name, the judge grades the recorded transcripts against each task's rubric."""

from __future__ import annotations

import sys
from pathlib import Path

from fakes.fake_engine import EngineServer
from fakes.scripted_engine import ScriptedEngine

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "judge"


def test_collect_on_the_judge_example_scores_by_rubric(judge_server: EngineServer, tmp_path: Path) -> None:
    policy = EngineServer(ScriptedEngine([{"text": "Let me look."}, {"text": "Camfe"}], model="policy")).start()
    try:
        config = load_config(EXAMPLE / "config.toml", {
            "engine": {"kind": "openai", "urls": [policy.url]},
            "gateway": {"render_mode": "engine"},
            "run": {"dir": str(tmp_path / "run"), "eval_tasks": 2},
            "runner": {"concurrency": 2, "timeout_s": 60},
        })
        config.runner.command = [sys.executable, *config.runner.command[1:]]  # this venv's python
        config.rewards.judge = config.rewards.judge.model_copy(update={"url": judge_server.url})  # type: ignore[union-attr]
        result = run_collect(config, None)
    finally:
        policy.stop()
    assert result.tasks == 2 and result.rewards == {"atlas-120": 1.0, "atlas-121": 0.0}  # Camfe is atlas-120's
    store = open_store(config.store_url)
    try:
        for rollout in store.list_rollouts(limit=10):
            (judged,) = store.get_judge_calls(rollout.id)
            assert judged.status == "ok" and judged.model == "scripted-judge"
            assert "Camfe" in (judged.request or "")  # the recorded transcript reached the judge
            assert "Reference answer" not in str(rollout.input)  # the rubric stayed out of the harness's input
    finally:
        store.close()

