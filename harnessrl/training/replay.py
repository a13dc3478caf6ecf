"""Success replay: a past attempt that scored above everything the current step produced is trained again.

Why: on the CPU demo a run learns once the policy has sampled the bare name (reward 1) a few times, and
the seeds that stalled had sampled it once, in their first steps, and never again (docs/training.md,
section 7). An attempt trained once, at one step's lr, is outweighed by the answer the rest of every
later batch reinforces. Replaying the best past attempts (self-imitation learning, Oh et al. 2018;
experience replay in RLEP/ExGRPO, 2025) keeps pulling toward them *until the policy produces that reward
itself*: a past attempt is replayed only while its reward is above every reward of the current step.

The replayed tokens are taken at ratio 1 against the current policy, not against the older one that sampled
them: their behaviour logprobs are NaN, which ``policy_loss`` reads as "the current policy". A ratio against
the old policy would clip (PPO) as soon as the policy moved 20% toward the attempt, which is the point.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples
from harnessrl.types import Call, Sample, SampleFidelity

#: Behaviour logprob of a replayed token: "no behaviour policy, take the ratio against the current one".
CURRENT_POLICY = math.nan


@dataclass(frozen=True, slots=True)
class PastAttempt:
    """A scored attempt of an earlier step (its training reward, as advantages saw it)."""

    rollout_id: str
    step: int
    reward: float


def beating(past: Sequence[PastAttempt], step_rewards: Sequence[float]) -> list[PastAttempt]:
    """The past attempts whose reward is above every reward of this step, best first (most recent first
    among equals); none when the step scored nothing (there is nothing to beat)."""
    if not step_rewards:
        return []
    best_now = max(step_rewards)
    better = [p for p in past if p.reward > best_now + 1e-12]
    return sorted(better, key=lambda p: (-p.reward, -p.step, p.rollout_id))


def choose_replays(
    past: Sequence[PastAttempt], step_rewards: Sequence[float], k: int, estimator: str
) -> list[tuple[PastAttempt, float]]:
    """The first ``k`` of ``beating``, each with its advantage against this step's rewards.

    The advantage is the attempt's reward minus this step's mean reward, divided by the step's reward std
    under ``grpo`` (when the step's rewards differ; the same scale its own groups use, roughly) and by 1
    under ``dr_grpo``/``rloo``. A step with no scored attempt replays nothing: there is nothing to beat.
    """
    chosen = beating(past, step_rewards)[:k] if k > 0 else []
    if not chosen:
        return []
    mean = statistics.fmean(step_rewards)
    scale = 1.0
    if estimator == "grpo" and len(step_rewards) > 1:
        std = statistics.stdev(step_rewards)
        scale = std if std > 1e-12 else 1.0
    return [(p, (p.reward - mean) / scale) for p in chosen]


def replay_samples(calls: Sequence[Call], attempt: PastAttempt, group_id: str, advantage: float,
                   config: SampleConfig | None = None) -> list[Sample]:
    """The attempt's training samples with ``advantage``, every trained token at ratio 1 (``CURRENT_POLICY``).

    Re-tokenized samples (no sampled tokens) are left out, as in ``prepare_batch``.
    """
    built = build_samples(calls, group_id, config, rollout_id=attempt.rollout_id)
    return [
        dataclasses.replace(
            s, advantage=advantage, token_advantages=None,
            behaviour_logprobs=[CURRENT_POLICY if m else 0.0 for m in s.loss_mask],
        )
        for s in built.samples
        if s.fidelity != SampleFidelity.RETOKENIZED
    ]
