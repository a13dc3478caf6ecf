"""A real run records what it cost (``harnessrl/run_cost.py``), and the records agree with the store: one step
of the tiny loop, its held-out evaluations, the totals appended and printed at its end."""

from __future__ import annotations

import json
import sqlite3

import pytest
from run_config import write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.run_cost import Cost, run_cost
from harnessrl.store import open_store

from ._config import loop_config


def test_a_runs_cost_records_match_the_store(tmp_path) -> None:  # ~25 s on 2 cores: model load, 4 + 2 x 3 attempts
    config = load_config(write_run_config(tmp_path, loop_config(tmp_path, steps=1, attempts=2),
                                          {"sft": {"min_reward": 0.5}}))
    summary = run_train(config)
    events = [json.loads(line) for line in (config.run_dir / "events.jsonl").read_text().splitlines()]
    step = Cost.from_record(next(e for e in events if e["event"] == "step")["cost"])
    evals = [Cost.from_record(e["cost"]) for e in events if e["event"] == "eval"]
    assert len(evals) == 2  # before and after

    store = open_store(config.store_url)
    rollouts = list(store.iter_rollouts(run_id=summary.run_id))
    train = [r for r in rollouts if r.step == 1]
    held_out = [r for r in rollouts if r.step is None]
    calls = {r.id: store.get_calls(r.id) for r in rollouts}

    def used(rs: list) -> tuple[int, int, int]:
        cs = [c for r in rs for c in calls[r.id]]
        return len(cs), sum(len(c.prompt_token_ids) for c in cs), sum(len(ch.token_ids) for c in cs for ch in c.choices)

    assert (step.attempts, step.calls, step.prompt_tokens, step.completion_tokens) == (len(train), *used(train))
    assert step.calls == 2 * len(train) == 8  # the agent makes two calls an attempt
    assert sum(e.attempts for e in evals) == len(held_out) == 6
    assert (sum(e.calls for e in evals), sum(e.prompt_tokens for e in evals),
            sum(e.completion_tokens for e in evals)) == used(held_out)
    assert step.successes == sum((rollout_reward(store.get_rewards(r.id)) or 0) >= 0.5 for r in train)
    assert step.harness_s == pytest.approx(sum(r.finished_at - r.started_at for r in train), abs=0.01)  # type: ignore[operator]
    # trained tokens: what the trainer wrote to metrics.jsonl for the step
    metrics = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = sum(m["tokens/trained"] for m in metrics if "tokens/trained" in m)
    assert step.tokens_trained == trained
    groups: dict[str, set] = {}
    for r in train:
        groups.setdefault(r.group_id, set()).add(rollout_reward(store.get_rewards(r.id)))
    if any(len(rewards) > 1 for rewards in groups.values()):  # a group whose rewards differ trains something
        assert trained > 0  # (two attempts of a task may score alike: then nothing is trained, by design)
    assert step.trainer_s > 0 and step.publish_s > 0 and step.harness_s > 0 and step.call_s > 0
    # the process's figures are what it did since the previous record: step 1 ran beside the first evaluation,
    # which was recorded first and took what both did (docs/dashboard.md); summed they are the run's
    assert step.engine_busy_s is not None and step.engine_busy_s >= 0
    assert sum(c.engine_busy_s or 0 for c in (step, *evals)) > 0
    assert step.cpu_s > 0 and step.peak_rss_bytes is not None and 2**27 < step.peak_rss_bytes < 64 * 2**30
    store.close()

    # the totals: every call of the run in the calls table, once; appended as the last event and printed
    with sqlite3.connect(config.store_url.removeprefix("sqlite:///")) as db:
        n, prompt = db.execute("SELECT COUNT(*), SUM(c.prompt_len) FROM calls c JOIN rollouts r ON r.id = c.rollout_id"
                               " WHERE r.run_id = ?", (summary.run_id,)).fetchone()
    cost = summary.cost
    assert cost is not None and cost == run_cost(events)
    assert (cost.total.calls, cost.total.prompt_tokens) == (n, prompt) == (used(rollouts)[0], used(rollouts)[1])
    assert cost.total.completion_tokens == used(rollouts)[2]
    assert cost.steps == 1 and cost.success_at == 0.5 and cost.train == step
    last = events[-1]
    assert last["event"] == "cost" and last["total"] == cost.total.record()
    lines = summary.cost_lines()
    assert lines[0].startswith(f"cost: {n:,} model calls (8 training, {n - 8:,} held-out)")
    assert lines[1].startswith("per successful training attempt")
