"""A run rewarded by a group-mode judge trains end to end: tiny model, real gateway, real harness processes,
and a judge model (scripted, on loopback) scoring each group's attempts in one call.

The scripted judge scores the final answer by a hash (the tasks' rubric has no reference answer), so a
group's attempts differ and the trainer has advantages to work with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakes.fake_engine import EngineServer
from fakes.scripted_judge import ScriptedJudge
from run_config import TINY_ENGINE, TINY_LORA, write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.inspection.terminal import print_rollout
from harnessrl.store import open_store

HERE = Path(__file__).resolve().parent


@pytest.mark.slow  # ~27 s on 2 cores (model load, 2 groups, one step)
def test_group_judge_run_trains_and_records_judge_calls(tmp_path: Path) -> None:
    scripted = ScriptedJudge()
    server = EngineServer(scripted).start()  # type: ignore[arg-type]
    try:
        cfg = write_run_config(tmp_path, {
            "run": {"name": "judged", "dir": str(tmp_path / "run"), "steps": 1, "tasks_per_step": 2,
                    "attempts_per_task": 3, "eval_at_start": False},
            "tasks": {"train": str(HERE / "train.jsonl"), "eval": str(HERE / "eval.jsonl")},
            "engine": TINY_ENGINE,
            "runner": {"command": [sys.executable, str(HERE / "agent.py")], "concurrency": 8, "timeout_s": 60},
            "rewards": {"combine": "judge", "judge": {
                "url": server.url, "mode": "group",
                "rubric": "Score how well the final answer follows up on the question."}},
            "training": {"lr": 1e-3, "lora": TINY_LORA},
        })
        config = load_config(cfg)
        summary = run_train(config)
    finally:
        server.stop()
    store = open_store(config.store_url)
    try:
        train = [r for r in store.list_rollouts(run_id=summary.run_id, limit=100) if r.metadata["split"] == "train"]
        assert len(train) == 2 * 3 and all(r.status.terminal and r.failure_kind is None for r in train)
        groups: dict[str, set[str]] = {}
        for r in train:
            rewards = {w.name: w.value for w in store.get_rewards(r.id)}
            assert rewards["final"] == rewards["judge"]
            (judged,) = store.get_judge_calls(r.id)
            assert judged.mode == "group" and judged.status == "ok" and judged.model == "scripted-judge"
            assert judged.reason and judged.latency_s is not None
            groups.setdefault(r.group_id, set()).add(judged.call_id)
        assert all(len(ids) == 1 for ids in groups.values()) and len(groups) == 2  # one judge call per group
        train_requests = [b for b in scripted.requests if "follows up" in json.dumps(b) and '"scores"' in json.dumps(b)]
        assert len(train_requests) >= 2
        metrics = [json.loads(x) for x in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
        trained = [m for m in metrics if "loss" in m]
        assert len(trained) == 1 and trained[0]["tokens/trained"] > 0  # the judge's scores were trained on
        assert (config.run_dir / "checkpoints" / "step_000001").is_dir()
        # harnessrl show prints the judge's verdict beside the rewards
        from rich.console import Console

        console = Console(width=200, record=True)
        print_rollout(store, train[0].id, console)
        text = console.export_text()
        reason = store.get_judge_calls(train[0].id)[0].reason or ""
        assert "judge calls" in text and "scripted-judge" in text and reason[:30] in text
    finally:
        store.close()


@pytest.mark.slow  # ~20 s: model load and one group
def test_a_judge_that_never_answers_validly_stops_the_step_as_infra(tmp_path: Path) -> None:
    from harnessrl.controller import StepFailed
    from harnessrl.types import FailureKind

    scripted = ScriptedJudge()
    scripted.garbage_next = 10**6  # never a parseable answer
    server = EngineServer(scripted).start()  # type: ignore[arg-type]
    try:
        cfg = write_run_config(tmp_path, {
            "run": {"dir": str(tmp_path / "run"), "steps": 1, "tasks_per_step": 1, "attempts_per_task": 2,
                    "eval_at_start": False},
            "tasks": {"train": str(HERE / "train.jsonl")},
            "engine": TINY_ENGINE,
            "runner": {"command": [sys.executable, str(HERE / "agent.py")], "timeout_s": 60},
            "rewards": {"judge": {"url": server.url, "mode": "group", "retries": 1, "rubric": "r"}},
        })
        config = load_config(cfg)
        with pytest.raises(StepFailed, match="judge failed: judge gave no valid score after 2 tries"):
            run_train(config)
    finally:
        server.stop()
    assert len(scripted.requests) == 2  # one group, asked twice, never re-run as attempts
    store = open_store(config.store_url)
    try:
        rollouts = store.list_rollouts(limit=10)
        assert len(rollouts) == 2 and all(r.failure_kind == FailureKind.INFRA for r in rollouts)
        assert all(store.get_rewards(r.id) == [] for r in rollouts)  # no silent 0
        assert all(store.get_judge_calls(r.id)[0].status == "error" for r in rollouts)
    finally:
        store.close()
