"""Rollout-level advantages within a task group (GRPO, Dr.GRPO, RLOO), broadcast to every sample.

One scalar per rollout, computed from its reward against the other attempts of the same task in the same
step, then copied onto all of its samples however many the harness's calls split into. Rollouts that
failed for infrastructure reasons are removed from their group *before* the baseline is computed: a crash
is not evidence about the policy, so it never becomes a reward of 0. Agent failures keep their reward.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from harnessrl.rewards.outcome import rollout_reward
from harnessrl.training.config import TrainingConfig
from harnessrl.types import FailureKind, Reward, Rollout, RolloutStatus, Sample


@dataclass(slots=True)
class RolloutRecord:
    """What the controller knows about one finished rollout: its row, its rewards and its samples."""

    rollout: Rollout
    rewards: list[Reward]
    samples: list[Sample]


@dataclass(slots=True)
class AdvantageResult:
    """Trainable samples (advantage set) plus what was left out and why."""

    samples: list[Sample]
    rewards: dict[str, float] = field(default_factory=dict)
    advantages: dict[str, float] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)


def group_baselines(values: Sequence[float], estimator: str, eps: float) -> list[tuple[float, float]]:
    """(baseline, scale) per rollout; its advantage is ``(reward - baseline) / scale``.

    grpo: (mean, std + eps) with the unbiased std as in DeepSeekMath/TRL; dr_grpo: (mean, 1);
    rloo: (mean of the *other* rollouts, 1).
    """
    n = len(values)
    mean = sum(values) / n
    if estimator == "grpo":
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        return [(mean, std + eps)] * n
    if estimator == "dr_grpo":
        return [(mean, 1.0)] * n
    if estimator == "rloo":
        total = sum(values)
        return [((total - v) / (n - 1) if n > 1 else v, 1.0) for v in values]
    raise ValueError(f"unknown advantage estimator {estimator!r}: use grpo, dr_grpo or rloo")


def group_advantages(values: Sequence[float], estimator: str, eps: float = 1e-6) -> list[float]:
    """Advantages of one group's rewards (pure; see ``group_baselines``)."""
    return [(v - b) / s for v, (b, s) in zip(values, group_baselines(values, estimator, eps), strict=True)]


def weighted(advantage: float, positive_weight: float) -> float:
    """``advantage`` with its positive part scaled (``[training] positive_weight``); negatives unchanged."""
    return advantage * positive_weight if advantage > 0 else advantage


def _exclusion(record: RolloutRecord) -> str | None:
    ro = record.rollout
    if ro.failure_kind == FailureKind.INFRA:
        return "infra_failure"
    if ro.status == RolloutStatus.CANCELLED:
        return "cancelled"
    if not ro.status.terminal:
        return "not_finished"
    return None


def _segment_returns(record: RolloutRecord, reward_name: str | None, discount: float) -> dict[int, float]:
    """Discounted return per trained call: its own call rewards plus later ones; outcome at the last call."""
    calls = sorted({c for s in record.samples for c in s.call_indices})
    if not calls:
        return {}
    step_reward = dict.fromkeys(calls, 0.0)
    for r in record.rewards:
        if r.call_index is not None and (reward_name is None or r.name == reward_name):
            later = [c for c in calls if c >= r.call_index]  # a reward on an excluded call moves forward
            if later:
                step_reward[later[0]] += r.value
    step_reward[calls[-1]] += rollout_reward(record.rewards, reward_name) or 0.0
    returns: dict[int, float] = {}
    running = 0.0
    for c in reversed(calls):
        running = step_reward[c] + discount * running
        returns[c] = running
    return returns


def compute_advantages(records: Sequence[RolloutRecord], config: TrainingConfig) -> AdvantageResult:
    """Score each rollout against its group and return the samples to train on.

    Counts: ``rollouts.<reason>`` for excluded rollouts, ``groups.zero_variance`` / ``groups.singleton``
    for groups that carry no signal, ``groups.trained`` and ``rollouts.trained`` for the rest.
    """
    result = AdvantageResult(samples=[])
    groups: dict[str, list[tuple[RolloutRecord, float]]] = defaultdict(list)
    for rec in records:
        why = _exclusion(rec)
        if why is None:
            if config.per_call_rewards:
                returns = _segment_returns(rec, config.reward_name, config.discount)
                value = returns[min(returns)] if returns else rollout_reward(rec.rewards, config.reward_name)
            else:
                value = rollout_reward(rec.rewards, config.reward_name)
            if value is None:
                why = "no_reward"
            else:
                groups[rec.rollout.group_id].append((rec, value))
                result.rewards[rec.rollout.id] = value
        if why is not None:
            result.counts[f"rollouts.{why}"] += 1
    for members in groups.values():
        values = [v for _, v in members]
        if len(values) < 2:
            result.counts["groups.singleton"] += 1
            continue
        if max(values) - min(values) <= 1e-12 and config.drop_zero_variance_groups:
            result.counts["groups.zero_variance"] += 1
            continue
        result.counts["groups.trained"] += 1
        for (rec, value), (base, scale) in zip(
            members, group_baselines(values, config.estimator, config.advantage_eps), strict=True
        ):
            adv = weighted((value - base) / scale, config.positive_weight)
            result.advantages[rec.rollout.id] = adv
            result.counts["rollouts.trained"] += 1
            returns = _segment_returns(rec, config.reward_name, config.discount) if config.per_call_rewards else {}
            for s in rec.samples:
                token_adv = None
                if returns:
                    token_adv = [0.0] * len(s.token_ids)
                    for c, (start, end) in zip(s.call_indices, s.call_spans, strict=True):
                        token_adv[start:end] = [weighted((returns[c] - base) / scale, config.positive_weight)] * (
                            end - start
                        )
                result.samples.append(dataclasses.replace(s, advantage=adv, token_advantages=token_adv))
    return result
