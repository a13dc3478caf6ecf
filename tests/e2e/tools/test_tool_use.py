"""RL teaches tool use: SmolLM2-135M inside examples/tools learns to call `search` (a shorter run).

The agent has no fallback: an answer without a search call names an invented capital it cannot know, so
the verifier's reward rises only if the tool-call rate does. The agent posts `used_tool` per rollout;
held-out rollouts are greedy, so the untrained policy's rate is fixed (about 1 in 16).
"""

from __future__ import annotations

import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.store import open_store

ROOT = Path(__file__).resolve().parents[3]
TOOLS, DEMO = ROOT / "examples" / "tools", ROOT / "examples" / "demo"


@pytest.mark.slow
def test_rl_raises_the_tool_call_rate(tmp_path: Path) -> None:
    example = tomllib.loads((TOOLS / "config.toml").read_text())
    cfg = write_run_config(tmp_path, example, {
        "run": {"dir": str(tmp_path / "run"), "steps": 2, "tasks_per_step": 4, "eval_tasks": 12},
        "tasks": {"train": str(DEMO / "train.jsonl"), "eval": str(DEMO / "eval.jsonl")},
        "runner": {"command": [sys.executable, str(TOOLS / "agent.py")], "sandbox_read_only": [str(DEMO)]},
        "rewards": {"verifier": [sys.executable, str(DEMO / "verify.py")]},
    })
    config = load_config(cfg)
    summary = run_train(config)
    store = open_store(config.store_url)
    used: dict[int, list[float]] = defaultdict(list)
    final: dict[int, list[float]] = defaultdict(list)
    for r in store.list_rollouts(run_id=summary.run_id, limit=1000):
        if r.metadata.get("split") != "eval":
            continue
        rewards = {x.name: x.value for x in store.get_rewards(r.id) if x.call_index is None}
        used[r.policy_version].append(rewards["used_tool"])
        final[r.policy_version].append(rewards["final"])
    store.close()
    assert sorted(used) == [0, 2] and len(used[0]) == len(used[2]) == 12

    def rate(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    assert rate(used[0]) <= 0.25, used[0]  # greedy, untrained: it answers from nothing
    assert rate(used[2]) >= rate(used[0]) + 0.5, (used[0], used[2])
    assert rate(final[2]) >= rate(final[0]) + 0.4, (final[0], final[2])
    assert summary.final is not None and summary.final.mean_reward == pytest.approx(rate(final[2]))
