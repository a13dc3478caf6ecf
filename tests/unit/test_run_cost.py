"""A run's cost records (``harnessrl/run_cost.py``): sums checked by hand, read from the store, the process's
share, the printed lines, and ``harnessrl show RUN``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from harnessrl.entrypoints.show import print_run_cost
from harnessrl.run_cost import (
    FIELDS,
    Cost,
    ProcessMeter,
    RunCost,
    attempts_cost,
    cost_lines,
    record_run_cost,
    run_cost,
    trained_cost,
)
from harnessrl.store import NewCall, open_store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, Run
from harnessrl.types import RolloutStatus as S

STEP1 = Cost(attempts=8, successes=2, calls=16, prompt_tokens=1600, completion_tokens=160, tokens_trained=120,
             engine_busy_s=4.0, call_s=30.0, trainer_s=5.0, harness_s=40.0, publish_s=1.0, cpu_s=20.0,
             children_cpu_s=6.0, peak_rss_bytes=2**30)
STEP2 = Cost(attempts=8, successes=6, calls=12, prompt_tokens=1200, completion_tokens=100, tokens_trained=90,
             engine_busy_s=3.0, call_s=20.0, trainer_s=4.0, harness_s=30.0, publish_s=0.5, cpu_s=15.0,
             children_cpu_s=5.0, peak_rss_bytes=3 * 2**29)
EVAL = Cost(attempts=3, successes=1, calls=6, prompt_tokens=600, completion_tokens=30, engine_busy_s=1.0,
            call_s=3.0, harness_s=6.0, cpu_s=2.0, children_cpu_s=1.0, peak_rss_bytes=2**30)


def test_costs_add_figure_by_figure_and_the_peak_is_the_larger() -> None:
    both = STEP1 + STEP2
    assert (both.attempts, both.successes, both.calls, both.prompt_tokens, both.completion_tokens) == \
        (16, 8, 28, 2800, 260)
    assert (both.tokens_trained, both.engine_busy_s, both.trainer_s, both.publish_s) == (210, 7.0, 9.0, 1.5)
    assert both.peak_rss_bytes == 3 * 2**29  # not 2.5 GiB: peaks do not add
    # an engine URL records no busy time: unknown stays unknown, a known figure is kept
    assert (Cost() + Cost()).engine_busy_s is None and (Cost() + STEP1).engine_busy_s == 4.0
    assert Cost() + STEP1 == STEP1 == STEP1 + Cost()


@given(st.builds(Cost, attempts=st.integers(0, 10**6), calls=st.integers(0, 10**6),
                 call_s=st.floats(0, 1e6), engine_busy_s=st.none() | st.floats(0, 1e6),
                 peak_rss_bytes=st.none() | st.integers(0, 2**40)))
def test_a_record_reads_back_as_written(cost: Cost) -> None:
    back = Cost.from_record(json.loads(json.dumps(cost.record())))
    assert back.attempts == cost.attempts and back.calls == cost.calls and back.peak_rss_bytes == cost.peak_rss_bytes
    assert back.call_s == pytest.approx(cost.call_s, abs=5e-4)
    assert (back.engine_busy_s is None) == (cost.engine_busy_s is None)


def test_a_malformed_record_keeps_what_it_can() -> None:
    c = Cost.from_record({"calls": 3, "prompt_tokens": "many", "call_s": float("nan"), "successes": True,
                          "engine_busy_s": None, "unknown": 1})
    assert c == Cost(calls=3)


def _events() -> list[dict]:
    return [
        {"event": "eval", "policy_version": 0, "cost": EVAL.record()},
        {"event": "step", "step": 1, "cost": {**STEP1.record(), "success_at": 1.0}},
        {"event": "step", "step": 2, "cost": {**STEP2.record(), "success_at": 1.0}},
        {"event": "step", "step": 3},  # written before costs were recorded: nothing to add
        {"event": "eval", "policy_version": 2, "cost": EVAL.record()},
        {"event": "cost", "total": {"calls": 10**9}},  # an earlier end's totals are not records
    ]


def test_a_run_sums_its_steps_and_evaluations_apart() -> None:
    cost = run_cost(_events())
    assert cost is not None
    assert cost.steps == 2 and cost.success_at == 1.0
    assert cost.train == STEP1 + STEP2
    assert cost.held_out == EVAL + EVAL
    assert cost.total.calls == 16 + 12 + 6 + 6 and cost.total.peak_rss_bytes == 3 * 2**29
    assert run_cost([{"event": "step", "step": 1}]) is None and run_cost([]) is None


def test_the_lines_a_run_ends_with() -> None:
    cost = run_cost(_events())
    assert cost is not None
    first, second = cost_lines(cost)
    assert first.startswith("cost: 40 model calls (28 training, 12 held-out), 4,000 prompt + 320 completion "
                            "tokens, 210 trained | engine busy 9.0s (call latencies 56s), trainer 9.0s, harness 82s, "
                            "publish 1.5s | CPU 39s (+13s harnesses, verifiers) | peak RSS 1.50 GiB")
    # 8 successes of 16 training attempts: 28 calls, 2,800 prompt and 260 completion tokens, 70 s among them
    assert second == ("per successful training attempt (reward >= 1: 8 of 16): 3.5 calls, 350 prompt + 32 "
                      "completion tokens, harness 8.8s")
    none = RunCost(1, Cost(attempts=5), Cost(), 1.0)
    assert cost_lines(none)[1] == "per successful training attempt: n/a (none of 5 reached reward >= 1)"
    sft = RunCost(2, Cost(tokens_trained=50, trainer_s=3.0), EVAL, None)
    assert cost_lines(sft)[1] == "per successful training attempt: n/a (no training attempt recorded)"
    odd = RunCost(1, Cost(attempts=2, calls=9, refused_calls=2, clamped_calls=3, stopped_at_clamp=1), Cost(), 1.0)
    assert cost_lines(odd)[2] == ("calls: 2 calls refused (harnessrl show ROLLOUT says why); 3 calls served less "
                                  "max_tokens than asked, 1 of them stopped there")


def test_the_runs_end_appends_its_totals(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in _events()) + '{"event": "st')  # a line cut by a kill
    cost = record_run_cost(tmp_path)
    last = json.loads(events.read_text().splitlines()[-1])
    assert cost is not None and last["event"] == "cost"
    assert last["total"] == cost.total.record() and last["train"]["calls"] == 28 and last["steps"] == 2
    assert record_run_cost(tmp_path / "nothing") is None


def test_attempts_cost_is_what_the_store_holds(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/store.db")
    run = store.create_run("r", {}).id
    made = [store.create_rollout(task_id=f"t{i}", input={}, group_id="g", api_key_hash="h", run_id=run, step=1)
            for i in range(4)]
    for r, calls, reward in zip(made, (2, 1, 1, 0), (1.0, 0.25, None, 1.5), strict=True):
        store.transition_rollout(r.id, S.RUNNING)
        store.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {"messages": []}, {}, [1] * (10 + k),
                                    [ChoiceTokens([2] * (3 + k), [-0.5] * (3 + k))], 0) for k in range(calls)])
        if reward is not None:
            store.add_reward(r.id, reward, "final")
        time.sleep(0.01)
        store.transition_rollout(r.id, S.SUCCEEDED)
    rollouts = [store.get_rollout(r.id) for r in made]
    cost = attempts_cost(store, rollouts, success_at=1.0)
    assert (cost.attempts, cost.successes, cost.calls) == (4, 2, 4)  # 1.0 and 1.5 reach the bar, 0.25 does not
    assert (cost.prompt_tokens, cost.completion_tokens) == (10 + 11 + 10 + 10, 3 + 4 + 3 + 3)
    assert cost.harness_s == pytest.approx(sum(r.finished_at - r.started_at for r in rollouts))  # type: ignore[operator]
    assert cost.harness_s >= 0.04
    assert attempts_cost(store, rollouts, success_at=0.25).successes == 3
    store.close()


def test_trained_cost_sums_the_policies_tokens() -> None:
    assert trained_cost({"tokens/trained": 70}, 2.0, 0.5) == Cost(tokens_trained=70, trainer_s=2.0, publish_s=0.5)
    two = {"policy/coder/tokens/trained": 30, "policy/critic/tokens/trained": 12}
    assert trained_cost(two, 1.0, 0.0).tokens_trained == 42


def test_the_process_share_is_measured_since_the_last_reading() -> None:
    engine = SimpleNamespace(busy_s=2.5)
    meter = ProcessMeter(engine)
    first = meter.take()
    assert first.engine_busy_s == 2.5 and first.cpu_s > 0  # since the process started
    assert first.peak_rss_bytes is not None and 10 * 2**20 < first.peak_rss_bytes < 64 * 2**30
    engine.busy_s = 4.0
    sum(i * i for i in range(300_000))  # some CPU
    second = meter.take()
    assert second.engine_busy_s == pytest.approx(1.5) and 0 < second.cpu_s < first.cpu_s
    assert ProcessMeter(None).take().engine_busy_s is None  # an engine URL: not measured


def test_show_prints_each_record_and_the_totals(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"run_id": "r-1"}))
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in _events()))
    out = Console(record=True, width=400)
    print_run_cost(Run("r-1", "demo", {}, 0.0), out, run_dirs=[run_dir], store_url=None)
    text = out.export_text()
    assert "run r-1 (demo)" in text and all(name in text for name in FIELDS)
    rows = [line for line in text.splitlines() if line.lstrip("│ ").startswith(("step ", "eval v"))]
    assert [r.lstrip("│ ").split("│")[0].strip() for r in rows] == ["eval v0", "step 1", "step 2", "eval v2"]
    cost = run_cost(_events())
    assert cost is not None and all(line in text for line in cost_lines(cost))
    out = Console(record=True, width=200)
    print_run_cost(Run("r-2", "other", {}, 0.0), out, run_dirs=[], store_url=None)
    assert "no cost recorded: its run directory (pass --run-dir)" in out.export_text()
