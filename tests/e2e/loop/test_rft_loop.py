"""``[run] mode = "rft"`` on the tiny model: each step keeps the attempts at or above the threshold and
trains on exactly their recorded tokens with the SFT loss (real harness, gateway, engine, verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import open_store

from ._config import loop_config


@pytest.mark.slow  # ~40 s on 2 cores: model load, 2 steps of 6 attempts, final evaluation
def test_rft_trains_only_the_attempts_at_or_above_the_threshold(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=2, attempts=3),
                           {"run": {"mode": "rft"}, "sft": {"min_reward": 0.5}})
    config = load_config(cfg)
    assert config.run.mode == "rft"
    summary = run_train(config)
    store = open_store(config.store_url)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = {m["step"]: m for m in metrics if "samples/count" in m}
    assert sorted(steps) == [1, 2]
    kept_total = 0
    for step, m in steps.items():
        rollouts = [r for r in store.list_rollouts(run_id=summary.run_id, step=step, limit=100)
                    if r.metadata.get("split") == "train"]
        rewards = {r.id: rollout_reward(store.get_rewards(r.id)) for r in rollouts}
        kept = {rid for rid, v in rewards.items() if v is not None and v >= 0.5}
        assert m["count/rft.kept"] == len(kept) and m.get("count/rft.rejected", 0) == len(rollouts) - len(kept)
        assert m["samples/rollouts"] == len(kept)
        # each kept attempt is one merged sample of its two calls: every sampled token is a target
        completion = sum(len(c.completion_token_ids) for rid in kept for c in store.get_calls(rid))
        assert m["tokens/trained"] == completion
        assert m["clip_fraction"] == 0.0 and m["ratio_mean"] == pytest.approx(1.0 if kept else 0.0)
        assert m["reward/mean"] == pytest.approx(sum(rewards.values()) / len(rewards))
        if kept:
            assert m["loss"] > 0.0  # a negative log-likelihood
        kept_total += len(kept)
    assert kept_total > 0, "no attempt reached the threshold: the test proves nothing"
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1, 2]
