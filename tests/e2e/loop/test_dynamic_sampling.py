"""Extra groups on the whole loop (tiny model): dynamic sampling and exploration launch more when a step lacks.

Flat tasks reward every attempt 0.5 (no variance, nothing to learn from, never the full reward); the others
reward the answer text, 1.0 for about one answer in seven. With one task per step, steps often start with
a group that lacks what the setting asks for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from run_config import TINY_LORA, write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import open_store

HERE = Path(__file__).resolve().parent


def _run(tmp_path: Path, *, tasks: int, flat: int, run_settings: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list]]:
    """Train 3 steps of 1 task x 3 attempts; per step, its metrics and its launched rollouts (launch order)."""
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"id": f"t{i}", "input": {"question": f"question {i}"},
                                         "verifier_input": {"flat": i < flat}}) + "\n" for i in range(tasks)))
    cfg = write_run_config(tmp_path, {
        "run": {"dir": str(tmp_path / "run"), "steps": 3, "tasks_per_step": 1, "attempts_per_task": 3,
                "eval_at_start": False, **run_settings},
        "tasks": {"train": str(train)},
        "engine": {"model": "tiny"},
        "runner": {"command": [sys.executable, str(HERE / "agent.py")], "concurrency": 12, "timeout_s": 300},
        "rewards": {"verifier": [sys.executable, str(HERE / "verify_flat.py")]},
        "training": {"lora": TINY_LORA},
    })
    config = load_config(cfg)
    summary = run_train(config)
    metrics = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "count/dynamic.attempts" in m]
    assert len(steps) == 3
    store = open_store(config.store_url)
    launched = [sorted(store.list_rollouts(run_id=summary.run_id, step=step, limit=100), key=lambda r: r.created_at)
                for step in (1, 2, 3)]
    return steps, [[(r, rollout_reward(store.get_rewards(r.id))) for r in rs] for rs in launched]


@pytest.mark.slow  # ~20 s on a quiet 2-core machine (three steps of up to 9 harness subprocesses)
@pytest.mark.timeout(1200)
def test_steps_launch_groups_until_one_has_varied_rewards_within_the_budget(tmp_path: Path, capsys) -> None:
    steps, launched = _run(tmp_path, tasks=8, flat=6, run_settings={"dynamic_sampling": True,
                                                                               "max_attempts_per_step": 9})
    for m, rollouts in zip(steps, launched, strict=True):
        assert m["count/dynamic.attempts"] == len(rollouts) <= 9  # the budget bounds every step
        assert m["count/dynamic.groups"] + m.get("count/dynamic.extra_groups", 0) == len(rollouts) // 3
        # it stops as soon as one group is informative, or when the budget is spent
        assert m["count/dynamic.informative_groups"] >= 1 or len(rollouts) == 9
        assert m.get("count/groups.trained", 0) == m["count/dynamic.informative_groups"]
    assert sum(m.get("count/dynamic.extra_groups", 0) for m in steps) >= 1  # flat first groups were topped up
    # stderr is not a terminal here: each step line is whole (its last field on the line that starts it)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert len(lines) == 3 and all("groups trained" in line and "publish" in line for line in lines), lines


@pytest.mark.slow  # ~20 s each on a quiet 2-core machine (three steps of up to 12 harness subprocesses)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("flat", [3, 12])  # 12: the full reward never appears, every step spends its budget
def test_exploration_launches_groups_until_the_full_reward_appears_then_trains_that_group(tmp_path: Path,
                                                                                         flat: int) -> None:
    steps, launched = _run(tmp_path, tasks=12, flat=flat,
                           run_settings={"explore_until_reward": 1.0, "max_attempts_per_step": 12})
    found_before = False
    for m, rollouts in zip(steps, launched, strict=True):
        groups: dict[str, list[float]] = {}
        for r, reward in rollouts:
            groups.setdefault(r.group_id, []).append(reward)
        rewards = list(groups.values())
        assert m["count/dynamic.attempts"] == len(rollouts) <= 12  # the budget bounds every step
        reached = [i for i, g in enumerate(rewards) if max(g) >= 1.0]
        assert m["count/explore.reached"] == bool(reached)
        if found_before:  # a run that has found the full reward explores no more
            assert len(rewards) == 1
        else:  # waves of one group until one holds a 1.0, or the budget is spent
            assert len(rewards) == (reached[0] + 1 if reached else 4)
        assert m["count/explore.untrained_groups"] == len(rewards) - 1
        if reached:  # the step trains the group that found it
            trained = rewards[reached[0]]
            assert m["reward/mean"] == pytest.approx(sum(trained) / len(trained))
        found_before = found_before or bool(reached)


@pytest.mark.slow  # ~20 s each on a quiet 2-core machine (three steps of up to 12 harness subprocesses)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("flat", [3, 12])
def test_holding_trains_nothing_until_the_full_reward_appears(tmp_path: Path, flat: int, capsys) -> None:
    """``explore_hold``: a step whose waves found no 1.0 (none found before either) trains nothing; the step
    that finds one trains as usual, and so does every step after it."""
    steps, launched = _run(tmp_path, tasks=12, flat=flat,
                           run_settings={"explore_until_reward": 1.0, "max_attempts_per_step": 12,
                                         "explore_hold": True})
    found = False
    for m, rollouts in zip(steps, launched, strict=True):
        found = found or any(reward >= 1.0 for _, reward in rollouts)
        if found:
            assert "count/explore.held" not in m
            assert m["samples/count"] > 0 and m["tokens/trained"] > 0
        else:
            assert m["count/explore.held"] == 1
            assert m["samples/count"] == 0 and m.get("tokens/trained", 0) == 0
            assert m["count/groups.trained"] == 0
            if flat == 3:  # the groups of the rewarded tasks varied: built, then held back
                assert m["count/explore.held_samples"] > 0 and m["count/explore.held_groups"] > 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert ["held: no 1 yet" in line for line in lines] == ["count/explore.held" in m for m in steps], lines
    if flat == 12:
        assert not found  # the flat tasks never reach 1.0: every step held
