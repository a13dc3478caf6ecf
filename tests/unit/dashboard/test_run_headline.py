"""The run page's headline figures, metric groups and float-noise rounding, on hand-written run files."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessrl.types import Run
from harnessrl.ui.headline import headline, phases, step_times
from harnessrl.ui.metric_groups import NOISE, denoise, group_metrics
from harnessrl.ui.plots import Bar, Mark, Series, line_chart, stacked_bars
from harnessrl.ui.runfiles import RunFiles

#: What one RL step of ``harnessrl train`` writes to metrics.jsonl (trainer metrics and step counts).
TRAINER = [
    "policy_version", "loss", "clip_fraction", "approx_kl", "ratio_mean", "is_weight_mean", "ref_kl", "entropy",
    "grad_norm", "grad_norm/last", "updates", "lr", "reward/mean", "reward/std", "advantage/mean", "advantage/std",
    "advantage/min", "advantage/max", "tokens/total", "tokens/trained", "tokens/computed", "tokens/padding",
    "tokens/shared_prefix_saved", "samples/count", "samples/rollouts", "samples/per_rollout", "micro_batches",
    "skipped", "memory/peak_rss_gb", "count/calls.merged", "count/dynamic.groups", "count/explore.held",
    "count/groups.trained", "count/groups.zero_variance", "count/rollouts.trained", "count/rollouts_stale_dropped",
    "count/excluded.extra_choices", "count/redacted.calls", "count/overflow.truncated", "count/tokens_changed",
    "count/replay.rollouts", "samples/merged", "samples/split", "time/step_s", "throughput/tokens_per_s",
    "count/render.extended", "count/fidelity.merged", "count/explore.reached", "count/replay.candidates",
]


def test_noise_is_zero_and_signal_is_kept() -> None:
    assert denoise(1.3877787807814457e-17) == 0.0 and denoise(-5e-10) == 0.0
    assert denoise(NOISE) == NOISE and denoise(-0.25) == -0.25 and denoise(3e-6) == 3e-6  # a learning rate


def test_groups_of_a_real_step() -> None:
    groups = {g.key: g.names for g in group_metrics(TRAINER)}
    assert list(groups) == ["rewards", "exploration", "training", "gateway"]  # display order, nothing "other"
    assert groups["rewards"] == ["reward/mean", "reward/std", "samples/rollouts", "count/rollouts.trained",
                                 "count/rollouts_stale_dropped", "count/replay.rollouts", "count/replay.candidates"]
    assert groups["exploration"] == ["count/groups.trained", "count/groups.zero_variance", "advantage/mean",
                                     "advantage/std", "advantage/min", "advantage/max", "entropy",
                                     "count/dynamic.groups", "count/explore.held", "count/explore.reached"]
    training = groups["training"]
    assert training[:3] == ["loss", "clip_fraction", "approx_kl"]  # the rule's order, not the file's
    assert {"lr", "time/step_s", "memory/peak_rss_gb", "count/overflow.truncated", "samples/count"} <= set(training)
    assert groups["gateway"] == ["samples/merged", "samples/split", "count/calls.merged", "count/render.extended",
                                 "count/fidelity.merged", "count/excluded.extra_choices", "count/redacted.calls",
                                 "count/tokens_changed"]


def test_policies_get_a_group_each_and_unknown_names_are_not_hidden() -> None:
    got = group_metrics(["policy/coder/loss", "loss", "policy/critic/loss", "policy/coder/reward/mean",
                         "policies/failed", "brand_new/thing"])
    assert [(g.key, g.label, g.names) for g in got] == [
        ("training", "Training and loss", ["loss"]),
        ("policies", "Policies", ["policies/failed"]),
        ("policy-coder", "Policy coder", ["policy/coder/loss", "policy/coder/reward/mean"]),
        ("policy-critic", "Policy critic", ["policy/critic/loss"]),
        ("other", "Other", ["brand_new/thing"])]


@given(st.lists(st.sampled_from(TRAINER) | st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}", fullmatch=True),
                unique=True))
def test_grouping_partitions_the_names(names: list[str]) -> None:
    grouped = [n for g in group_metrics(names) for n in g.names]
    assert sorted(grouped) == sorted(names)  # each name shown exactly once


def test_a_chart_of_noise_reads_zero() -> None:
    svg = str(line_chart("advantage/mean", [Series("advantage/mean", [(1, 1.4e-17), (2, -2.8e-17)])]))
    assert "e-17" not in svg and "e-1" not in svg
    assert re.findall(r"step \d = ([^<]+)</title>", svg) == ["0", "0"]


def test_marks_are_drawn_and_labelled() -> None:
    svg = str(line_chart("reward", [Series("train", [(1, 0.2), (2, 0.4)])],
                         marks=[Mark(0, "v0 0.10"), Mark(2, "v2 0.50")]))
    assert re.findall(r'<g class="chart-mark" data-x="([^"]+)">', svg) == ["0", "2"]
    assert "v0 0.10" in svg and 'text-anchor="end">v2 0.50' in svg  # the last label stays inside the frame


def test_stacked_bars_stack_in_order() -> None:
    svg = str(stacked_bars("t", [Bar(1, [("phase-rollouts", "rollouts", 3.0), ("phase-train", "training", 1.0)])]))
    rects = re.findall(r'<rect class="(phase-\w+)" x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)"', svg)
    assert [r[0] for r in rects] == ["phase-rollouts", "phase-train"]
    (_, y0, h0), (_, y1, h1) = rects
    assert float(h0) == pytest.approx(3 * float(h1), rel=0.01) and float(y1) + float(h1) == pytest.approx(float(y0))
    assert "no data yet" in str(stacked_bars("t", []))


def _files(*events: dict, metrics: tuple[dict, ...] = ()) -> RunFiles:
    from pathlib import Path

    return RunFiles(Path("/run"), metrics=list(metrics), events=list(events))


STEP = {"event": "step", "rollouts": 8, "failed": 1, "infra": 0, "stale_dropped": 0, "reward_mean": 0.5}


def test_headline_of_a_run_in_progress() -> None:
    files = _files({"event": "eval", "time": 100.0, "policy_version": 0, "mean_reward": 0.16, "tasks": 6,
                    "infra_failures": 0},
                   {**STEP, "time": 110.0, "step": 1, "policy_version": 1,
                    "seconds": {"rollouts": 6.0, "train": 3.0, "publish": 1.0}},
                   {**STEP, "time": 120.0, "step": 2, "policy_version": 2, "infra": 2, "failed": 3,
                    "seconds": {"rollouts": 10.0, "train": 1.0, "publish": 1.0}},
                   {"event": "eval", "time": 130.0, "policy_version": 2, "mean_reward": float("nan"), "tasks": 0,
                    "infra_failures": 6})
    run = Run("r", "n", {"run": {"steps": 10}}, 0.0)
    h = headline(run, files, now=190.0)
    assert (h.status.kind, h.status.text) == ("in progress", "no attempt in flight; last event 60 s ago")
    assert (h.steps_done, h.steps_planned, h.policy_version) == (2, 10, 2)
    assert h.before is not None and h.before.mean_reward == 0.16
    assert h.after is not None and h.after.mean_reward is None and h.after.infra_failures == 6
    assert [(p.key, p.label, p.mean_s) for p in h.phases] == [
        ("rollouts", "rollouts", 8.0), ("train", "training", 2.0), ("publish", "publishing", 1.0)]
    assert h.step_mean_s == 11.0 and sum(p.share for p in h.phases) == pytest.approx(1.0)
    assert h.outcomes is not None
    assert (h.outcomes.rollouts, h.outcomes.failed, h.outcomes.infra, h.outcomes.eval_infra) == (16, 4, 2, 6)
    assert h.outcomes.attempts is None and h.outcomes.trained is None and h.outcomes.shown == 16
    assert headline(run, files, in_flight=3).status.text == "attempts in flight"


def test_headline_ended_failed_and_empty() -> None:
    files = _files({**STEP, "step": 1, "time": 1.0}, {"event": "step_failed", "step": 2, "infra": 8,
                                                      "reason": "verifier not found", "time": 2.0})
    failed = headline(Run("r", "n", {}, 0.0), files).status
    assert failed.kind == "failed" and "step 2 failed: verifier not found" in failed.text
    assert headline(Run("r", "n", {}, 0.0, ended_at=5.0), files).status.kind == "ended"
    # a resumed run got past the failed step: no longer failed
    assert headline(Run("r", "n", {}, 0.0), _files(*files.events, {**STEP, "step": 2})).status.kind == "in progress"
    empty = headline(Run("r", "n", {}, 0.0), RunFiles(None))
    assert (empty.steps_done, empty.steps_planned, empty.before, empty.after, empty.outcomes) == (0, None, None,
                                                                                                  None, None)
    assert empty.phases == [] and empty.status.text == "nothing recorded yet"


def test_sft_steps_and_metrics_only_runs() -> None:
    sft = _files({"event": "sft_step", "step": 3, "policy_version": 3, "seconds": 4.2})
    h = headline(Run("r", "n", {"run": {"steps": 10}, "sft": {"steps": 5}}, 0.0), sft)
    assert (h.steps_done, h.steps_planned, h.phases) == (3, 5, [])  # one number of seconds: no phases
    # no events.jsonl: steps and evaluations from metrics.jsonl (the eval rows are not steps)
    only = _files(metrics=({"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5},
                           {"step": 2, "eval/reward_mean": 0.75, "eval/tasks": 4}, {"step": 9, "eval/reward_mean": 1}))
    h = headline(Run("r", "n", {}, 0.0), only)
    assert h.outcomes is None  # no events.jsonl: nothing says what the steps ran
    assert h.steps_done == 2 and [(e.policy_version, e.mean_reward) for e in h.evaluations] == [(2, 0.75), (9, 1.0)]


def test_attempts_and_trained_come_from_the_metrics() -> None:
    # step 1 explored (72 attempts, held: none trained); step 2 trained 16 of its 24
    files = _files({**STEP, "step": 1, "rollouts": 24}, {**STEP, "step": 2, "rollouts": 24},
                   metrics=({"step": 0, "eval/reward_mean": 0.1},
                            {"step": 1, "count/dynamic.attempts": 72, "count/rollouts.trained": 0},
                            {"step": 2, "count/dynamic.attempts": 24, "count/rollouts.trained": 16}))
    o = headline(Run("r", "n", {}, 0.0), files).outcomes
    assert o is not None and (o.attempts, o.rollouts, o.trained, o.shown) == (96, 48, 16, 96)


def test_phases_in_the_controllers_order_with_extra_keys_after() -> None:
    got, total, timed = phases([{"seconds": {"publish": 1.0, "wait": 2.0, "rollouts": 3.0}}, {"seconds": None}])
    assert [p.key for p in got] == ["rollouts", "publish", "wait"] and (total, timed) == (6.0, 1)
    assert step_times([{"step": 4, "seconds": {"train": 2, "rollouts": 1}}]) == [(4, [("rollouts", 1.0),
                                                                                     ("train", 2.0)])]
