"""Advantage estimators on hand-computed numbers; infra failures, zero variance and per-call returns."""

from __future__ import annotations

import dataclasses
import math

import pytest

from harnessrl.training.advantages import RolloutRecord, compute_advantages, group_advantages
from harnessrl.training.config import TrainingConfig
from harnessrl.types import FailureKind, Reward, Rollout, RolloutStatus

from ._helpers import make_sample

REWARDS = [1.0, 2.0, 3.0, 6.0]  # mean 3, deviations -2 -1 0 3, unbiased var 14/3


def test_grpo_hand_computed():
    std = math.sqrt(14 / 3)
    got = group_advantages(REWARDS, "grpo", eps=0.0)
    assert got == pytest.approx([-2 / std, -1 / std, 0.0, 3 / std], abs=1e-12)
    assert got[0] == pytest.approx(-0.9258200997725514)


def test_dr_grpo_hand_computed():
    assert group_advantages(REWARDS, "dr_grpo") == pytest.approx([-2.0, -1.0, 0.0, 3.0])


def test_rloo_hand_computed():
    # r_i - mean of the other three: 1 - 11/3, 2 - 10/3, 3 - 9/3, 6 - 6/3
    assert group_advantages(REWARDS, "rloo") == pytest.approx([-8 / 3, -4 / 3, 0.0, 4.0])


def test_unknown_estimator_is_an_error():
    with pytest.raises(ValueError, match="grpo"):
        group_advantages([1.0, 2.0], "ppo")


def _rollout(rid: str, group: str = "g", status=RolloutStatus.SUCCEEDED, failure=None) -> Rollout:
    return Rollout(id=rid, run_id=None, task_id="t", group_id=group, input={}, status=status, policy_version=0,
                   failure_kind=failure)


def _record(rid, reward, group="g", status=RolloutStatus.SUCCEEDED, failure=None, n_samples=1):
    rewards = [] if reward is None else [Reward(rollout_id=rid, value=reward)]
    samples = [make_sample([1, 2, 3], [0, 1, 1], rollout_id=rid, group_id=group) for _ in range(n_samples)]
    return RolloutRecord(rollout=_rollout(rid, group, status, failure), rewards=rewards, samples=samples)


def test_infra_failure_is_excluded_not_zero_and_agent_failure_keeps_reward():
    records = [
        _record("a", 1.0),
        _record("b", 0.0, status=RolloutStatus.FAILED, failure=FailureKind.AGENT),
        _record("c", 0.0, status=RolloutStatus.FAILED, failure=FailureKind.INFRA),
        _record("d", None, status=RolloutStatus.FAILED, failure=FailureKind.INFRA),
    ]
    res = compute_advantages(records, TrainingConfig(estimator="dr_grpo"))
    assert res.advantages == pytest.approx({"a": 0.5, "b": -0.5})  # c's reward 0 did not enter the mean
    assert res.counts["rollouts.infra_failure"] == 2
    assert {s.rollout_id for s in res.samples} == {"a", "b"}


def test_advantage_is_broadcast_to_every_sample_of_a_rollout():
    res = compute_advantages([_record("a", 1.0, n_samples=3), _record("b", 0.0)], TrainingConfig(estimator="rloo"))
    assert [s.advantage for s in res.samples] == [1.0, 1.0, 1.0, -1.0]


def test_zero_variance_singleton_and_missing_reward_are_reported():
    records = [_record("a", 1.0, group="g1"), _record("b", 1.0, group="g1"), _record("c", 0.5, group="g2"),
               _record("d", None, group="g3"), _record("e", 2.0, group="g3"),
               _record("f", 1.0, group="g4", status=RolloutStatus.CANCELLED)]
    res = compute_advantages(records, TrainingConfig())
    assert res.samples == []
    assert res.counts["groups.zero_variance"] == 1
    assert res.counts["groups.singleton"] == 2  # g2, and g3 after d (no reward) left it
    assert res.counts["rollouts.no_reward"] == 1 and res.counts["rollouts.cancelled"] == 1
    kept = compute_advantages(records[:2], TrainingConfig(drop_zero_variance_groups=False))
    assert [s.advantage for s in kept.samples] == [0.0, 0.0]


def _one_call_record(rid: str, reward: float) -> RolloutRecord:
    """A rollout of one sample holding one call (token 1 trained), for per-call returns."""
    record = _record(rid, reward)
    record.samples = [dataclasses.replace(make_sample([1, 2], [0, 1], rollout_id=rid), call_spans=[(1, 2)])]
    return record


def test_per_call_rewards_give_discounted_segment_returns():
    # rollout a: calls 0,1,2 in one sample; call rewards 1 on call 0, outcome 2 -> step rewards 1, 0, 2
    from harnessrl.types import Sample, SampleFidelity

    sample = Sample(rollout_id="a", group_id="g", token_ids=[1, 2, 3, 4, 5, 6], loss_mask=[0, 1, 0, 1, 0, 1],
                    behaviour_logprobs=[0.0] * 6, policy_versions=[0, 0, 0], call_indices=[0, 1, 2],
                    fidelity=SampleFidelity.MERGED, call_spans=[(1, 2), (3, 4), (5, 6)])
    a = RolloutRecord(_rollout("a"), [Reward("a", 1.0, call_index=0), Reward("a", 2.0)], [sample])
    b = _one_call_record("b", 0.5)
    cfg = TrainingConfig(estimator="dr_grpo", per_call_rewards=True, discount=0.5)
    res = compute_advantages([a, b], cfg)
    # returns: G2 = 2, G1 = 0 + .5*2 = 1, G0 = 1 + .5*1 = 1.5; group mean of (1.5, 0.5) = 1.0
    assert res.rewards == pytest.approx({"a": 1.5, "b": 0.5})
    sa, sb = res.samples
    assert sa.advantage == pytest.approx(0.5)
    assert sa.token_advantages == pytest.approx([0.0, 0.5, 0.0, 0.0, 0.0, 1.0])
    assert sb.token_advantages == pytest.approx([0.0, -0.5])


def test_positive_weight_scales_only_what_beat_the_group():
    # the demo's rewards: a sentence (0.25) beat three wrong names; grpo gives it +1.5, each wrong name -0.5
    records = [_record("s", 0.25), _record("w1", 0.0), _record("w2", 0.0), _record("w3", 0.0)]
    full = compute_advantages(records, TrainingConfig()).advantages
    assert full == pytest.approx({"s": 1.5, "w1": -0.5, "w2": -0.5, "w3": -0.5}, abs=1e-4)
    damped = compute_advantages(records, TrainingConfig(positive_weight=0.1)).advantages
    assert damped == pytest.approx({"s": 0.15, "w1": -0.5, "w2": -0.5, "w3": -0.5}, abs=1e-4)
    # the rollout's samples carry the scaled value too (per-call returns: the next test)
    assert {s.rollout_id: s.advantage for s in compute_advantages(records, TrainingConfig(
        positive_weight=0.1)).samples}["s"] == pytest.approx(0.15, abs=1e-4)


def test_positive_weight_scales_positive_per_call_returns_too():
    from harnessrl.types import Sample, SampleFidelity

    sample = Sample(rollout_id="a", group_id="g", token_ids=[1, 2, 3, 4], loss_mask=[0, 1, 0, 1],
                    behaviour_logprobs=[0.0] * 4, policy_versions=[0, 0], call_indices=[0, 1],
                    fidelity=SampleFidelity.MERGED, call_spans=[(1, 2), (3, 4)])
    a = RolloutRecord(_rollout("a"), [Reward("a", -1.0, call_index=0), Reward("a", 2.0)], [sample])
    b = _one_call_record("b", 0.0)
    cfg = TrainingConfig(estimator="dr_grpo", per_call_rewards=True, positive_weight=0.5)
    # returns: call 1: 2, call 0: -1 + 2 = 1; group mean of (1, 0) = 0.5 -> call 0: +0.5, call 1: +1.5
    sa = compute_advantages([a, b], cfg).samples[0]
    assert sa.advantage == pytest.approx(0.25)
    assert sa.token_advantages == pytest.approx([0.0, 0.25, 0.0, 0.75])


def test_positive_weight_must_be_in_0_1():
    from pydantic import ValidationError

    for bad in (0.0, 1.5):
        with pytest.raises(ValidationError):
            TrainingConfig(positive_weight=bad)
