"""examples/two-roles on the tiny model: two LoRA policies trained in one run through the real loop
(harness, gateway, embedded engine serving both adapters, verifier). Each call records the policy that
served it and that policy's version; both versions advance; the metrics are per policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.store import open_store

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "two-roles" / "config.toml"
VARIED = ROOT / "tests" / "e2e" / "loop" / "verify.py"  # reward from the answer's hash: groups vary


@pytest.mark.slow  # ~1-2 min on 2 cores: tiny model, 2 steps of 2 tasks x 2 attempts, two evaluations
def test_two_roles_trains_two_policies_in_one_run(tmp_path: Path) -> None:
    overrides = {
        "run": {"dir": str(tmp_path / "run"), "steps": 2, "tasks_per_step": 2, "attempts_per_task": 2,
                "eval_tasks": 2, "train_temperature": 1.0},
        "engine": {"model": "tiny", "max_batch": 8},
        "runner": {"command": [sys.executable, str(EXAMPLE.parent / "agent.py")], "concurrency": 4,
                   "timeout_s": 120},
        "rewards": {"verifier": [sys.executable, str(VARIED)]},
        "training": {"gradient_checkpointing": False, "lora": {"r": 4, "alpha": 8}},
    }
    config = load_config(EXAMPLE, overrides)
    assert sorted(config.policies) == ["planner", "solver"]
    summary = run_train(config)
    store = open_store(config.store_url)
    rollouts = [r for r in store.list_rollouts(run_id=summary.run_id, limit=1000)
                if r.metadata.get("split") == "train"]
    assert len(rollouts) == 2 * 2 * 2
    seen: dict[str, set[int]] = {"planner": set(), "solver": set()}
    for r in rollouts:
        calls = store.get_calls(r.id)
        assert [c.sampling.get("policy") for c in calls] == ["planner", "solver"]
        assert [c.requested_model for c in calls] == ["gpt-4o-mini", "gpt-4o"]
        for c in calls:
            seen[c.sampling["policy"]].add(c.policy_version)
            assert c.policy_version == r.step - 1  # trained once per step before it: v0 at step 1, v1 at 2
    assert seen == {"planner": {0, 1}, "solver": {0, 1}}
    evals = [r for r in store.list_rollouts(run_id=summary.run_id, limit=1000)
             if r.metadata.get("split") == "eval"]
    final = [c for r in evals if r.policy_version == 2 for c in store.get_calls(r.id)]
    assert final and {(c.sampling["policy"], c.policy_version) for c in final} == {("planner", 2), ("solver", 2)}
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "policies/failed" in m]
    assert [m["step"] for m in steps] == [1, 2] and all(m["policies/failed"] == 0 for m in steps)
    for name in ("planner", "solver"):
        assert [m[f"policy/{name}/policy_version"] for m in steps] == [0, 1]  # before each publish
        assert sum(m[f"policy/{name}/tokens/trained"] for m in steps) > 0, f"{name} trained nothing"
    assert (tmp_path / "run" / "checkpoints" / "step_000002" / "policies" / "planner").is_dir()
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1, 2]
