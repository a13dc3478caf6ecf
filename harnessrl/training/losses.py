"""The policy-gradient loss and how much each token weighs in it.

Weights are computed once per step over the whole batch and sum to 1, so the loss of a step is a plain
weighted sum over tokens: micro-batching and gradient accumulation cannot change it, and under the
``rollout`` normalization a rollout's tokens together weigh ``1 / num_rollouts`` however many samples its
calls split into (a harness that makes 20 calls does not outweigh one that makes 3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from harnessrl.types import Sample


def token_weights(samples: Sequence[Sample], normalization: str) -> list[list[float]]:
    """Per-token loss weights (0 where the loss mask is 0), summing to 1 over the batch.

    rollout: ``1 / (num_rollouts * trained_tokens_of_that_rollout)``; token: ``1 / trained_tokens``;
    sequence: ``1 / (num_samples * trained_tokens_of_that_sample)``.
    """
    per_sample = [sum(s.loss_mask) for s in samples]
    if normalization == "token":
        total = sum(per_sample)
        denom = [float(total)] * len(samples)
    elif normalization == "sequence":
        n = sum(1 for c in per_sample if c)
        denom = [float(n * c) for c in per_sample]
    elif normalization == "rollout":
        per_rollout: Counter[str] = Counter()
        for s, c in zip(samples, per_sample, strict=True):
            per_rollout[s.rollout_id] += c
        n = sum(1 for c in per_rollout.values() if c)
        denom = [float(n * per_rollout[s.rollout_id]) for s in samples]
    else:
        raise ValueError(f"unknown normalization {normalization!r}: use rollout, token or sequence")
    return [[m / d if d else 0.0 for m in s.loss_mask] for s, d in zip(samples, denom, strict=True)]


@dataclass(slots=True)
class LossOutput:
    """The weighted loss of some tokens and token *sums* of the diagnostics (divide by token count)."""

    loss: torch.Tensor
    clipped: float
    approx_kl: float
    ratio: float
    is_weight: float
    ref_kl: float


def policy_loss(
    logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    tis_cap: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    old_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> LossOutput:
    """PPO clipped objective over trained tokens (all 1-D tensors of the same length).

    ``entropy`` (the policy's entropy at each token, with gradient) times ``entropy_coef`` is subtracted
    per token: a bonus for keeping the sampling distribution open.

    Without ``tis_cap`` the ratio is taken against the engine's behaviour logprobs. With it, the ratio is
    taken against the trainer's own "old" logprobs and each token is weighted by
    ``min(p_old / p_engine, tis_cap)``, correcting for the engine/trainer numerical mismatch without
    letting rare tokens explode the update. The old logprobs are ``old_logp`` (the trainer's, computed
    before a step's first update) when a step takes several updates, else ``logp`` detached (equal to
    them at a step's only update).

    A NaN behaviour logprob (a replayed success, ``training/replay.py``) means "sampled by an older policy
    whose ratio does not apply": the token is taken against the current policy (the trainer's "old"
    logprobs when a step takes several updates), so its ratio starts at 1 and its importance weight is 1.
    """
    high = clip_eps if clip_eps_high is None else clip_eps_high
    # replayed tokens (training/replay.py): ratio 1 against this policy; no `.any()` test, which would stall
    # the GPU on a host sync for every micro-batch
    current = logp.detach() if old_logp is None else old_logp
    behaviour_logp = torch.where(torch.isnan(behaviour_logp), current, behaviour_logp)
    if tis_cap is not None:
        old = current
        is_w = torch.exp(old - behaviour_logp).clamp(max=tis_cap)
    else:
        old = behaviour_logp
        is_w = torch.ones_like(logp)
    ratio = torch.exp(logp - old)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + high) * advantages
    per_token = -torch.minimum(unclipped, clipped) * is_w
    ref_kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        ref_kl = torch.exp(d) - d - 1.0  # k3 estimator: unbiased, always >= 0
        per_token = per_token + kl_coef * ref_kl
    if entropy is not None and entropy_coef > 0:
        per_token = per_token - entropy_coef * entropy
    loss = (per_token * weights).sum()
    with torch.no_grad():
        log_r = logp.detach() - behaviour_logp
        was_clipped = ((ratio < 1.0 - clip_eps) & (advantages < 0)) | ((ratio > 1.0 + high) & (advantages > 0))
        return LossOutput(
            loss=loss,
            clipped=float(was_clipped.sum()),
            approx_kl=float((torch.exp(log_r) - 1.0 - log_r).sum()),
            ratio=float(torch.exp(log_r).sum()),
            is_weight=float(is_w.sum()),
            ref_kl=float(ref_kl.detach().sum()),
        )


def sft_loss(
    logp: torch.Tensor,
    weights: torch.Tensor,
    *,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> LossOutput:
    """Supervised loss: weighted negative log-likelihood of the trained tokens (``docs/sft.md``).

    Not the policy-gradient loss with advantage 1: its ratio against the behaviour logprobs would clip
    once the policy moved, and re-tokenized samples have no behaviour logprobs. The weights are the same
    (``token_weights``), so a chatty attempt does not outweigh a short one under ``rollout`` normalization.
    """
    per_token = -logp
    ref_kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        ref_kl = torch.exp(d) - d - 1.0
        per_token = per_token + kl_coef * ref_kl
    loss = (per_token * weights).sum()
    n = float(logp.numel())
    return LossOutput(loss=loss, clipped=0.0, approx_kl=0.0, ratio=n, is_weight=n,
                      ref_kl=float(ref_kl.detach().sum()))
