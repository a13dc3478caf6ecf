"""Token weights per normalization and the PPO/TIS/KL loss on hand-computed numbers; the rollout property."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.training.losses import policy_loss, token_weights
from harnessrl.training.samples import build_samples

from ._helpers import make_call, make_sample


def _three_samples():
    a = make_sample([1, 2, 3], [0, 1, 1], rollout_id="r1")
    b = make_sample([1, 4], [0, 1], rollout_id="r1")
    c = make_sample([5, 6], [0, 1], rollout_id="r2")
    return [a, b, c]


def _flat(w):
    return [x for row in w for x in row]


def test_token_normalization():
    assert token_weights(_three_samples(), "token") == [[0, 0.25, 0.25], [0, 0.25], [0, 0.25]]


def test_sequence_normalization():
    w = token_weights(_three_samples(), "sequence")
    assert _flat(w) == pytest.approx([0, 1 / 6, 1 / 6, 0, 1 / 3, 0, 1 / 3])


def test_rollout_normalization():
    w = token_weights(_three_samples(), "rollout")
    assert _flat(w) == pytest.approx([0, 1 / 6, 1 / 6, 0, 1 / 6, 0, 1 / 2])
    assert sum(map(sum, w)) == pytest.approx(1.0)


def test_ppo_clip_hand_computed():
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    out = policy_loss(logp, torch.tensor([-1.0, -1.5]), torch.tensor([1.0, -1.0]), torch.tensor([0.5, 0.5]))
    # token 0: ratio 1, A=1 -> -1. token 1: ratio e^-0.5=0.6065 < 0.8 with A=-1 -> clipped term -0.8 -> +0.8
    assert float(out.loss.detach()) == pytest.approx(0.5 * -1.0 + 0.5 * 0.8)
    assert out.clipped == 1
    out.loss.backward()
    assert logp.grad.tolist() == pytest.approx([-0.5, 0.0])  # the clipped token gets no gradient
    assert out.approx_kl == pytest.approx(math.exp(-0.5) - 1 + 0.5)


def test_asymmetric_clip_high():
    logp = torch.tensor([0.0])
    beh = torch.tensor([-0.25])  # ratio e^0.25 = 1.284
    adv = torch.tensor([1.0])
    assert float(policy_loss(logp, beh, adv, torch.ones(1)).loss) == pytest.approx(-1.2)
    assert float(policy_loss(logp, beh, adv, torch.ones(1), clip_eps_high=0.28).loss) == pytest.approx(-1.28)


def test_truncated_importance_sampling_hand_computed():
    logp = torch.tensor([-1.0], requires_grad=True)
    beh, adv, w = torch.tensor([-1.2]), torch.tensor([2.0]), torch.ones(1)
    capped = policy_loss(logp, beh, adv, w, tis_cap=1.1)  # weight min(e^0.2 = 1.2214, 1.1) = 1.1
    assert float(capped.loss.detach()) == pytest.approx(-2.2)
    capped.loss.backward()
    assert logp.grad.tolist() == pytest.approx([-2.2])
    free = policy_loss(logp.detach(), beh, adv, w, tis_cap=2.0)
    assert float(free.loss) == pytest.approx(-2 * math.exp(0.2))


def test_kl_penalty_k3_hand_computed():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])
    out = policy_loss(logp, logp, torch.zeros(1), torch.ones(1), ref_logp=ref, kl_coef=0.1)
    assert float(out.loss.detach()) == pytest.approx(0.1 * (math.exp(-0.5) + 0.5 - 1))
    off = policy_loss(logp, logp, torch.zeros(1), torch.ones(1), ref_logp=ref, kl_coef=0.0)
    assert float(off.loss) == 0.0


# -- property: under `rollout`, splitting a rollout's calls into more samples does not change the gradient --
rollouts_st = st.lists(  # rollouts -> calls -> (completion length, context length, breaks prefix?)
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.booleans()), min_size=1, max_size=5),
    min_size=1, max_size=4,
)


def _calls(rid: int, spec, split: bool):
    """Calls of one rollout; when ``split`` the flagged calls re-render history so the prefix breaks."""
    calls, seq, nxt = [], [1000 + rid], 0
    for i, (n_out, n_ctx, brk) in enumerate(spec):
        prompt = seq + [2000 + j for j in range(n_ctx)]
        if split and brk and i > 0:
            prompt = [3000 + i] + prompt  # history edited: nothing earlier is a prefix any more
        completion = [rid * 100 + nxt + j for j in range(n_out)]  # unique id per sampled token
        nxt += n_out
        calls.append(make_call(i, prompt, completion, rollout_id=f"r{rid}"))
        seq = prompt + completion
    return calls


def _grad(spec_by_rollout, split: bool, advs, beh_by_token) -> dict[int, float]:
    samples = []
    for rid, spec in enumerate(spec_by_rollout):
        for s in build_samples(_calls(rid, spec, split), "g").samples:
            samples.append(s.__class__(**{**{f: getattr(s, f) for f in s.__slots__}, "advantage": advs[rid]}))
    weights = token_weights(samples, "rollout")
    ids = sorted({t for s in samples for t, m in zip(s.token_ids, s.loss_mask, strict=True) if m})
    theta = torch.zeros(len(ids), dtype=torch.float64, requires_grad=True)  # a logit per sampled token
    pos = {t: i for i, t in enumerate(ids)}
    toks = [(t, w, s.advantage) for s in samples
            for t, m, w in zip(s.token_ids, s.loss_mask, weights[samples.index(s)], strict=True) if m]
    logp = torch.stack([theta[pos[t]] - 1.0 for t, _, _ in toks])
    out = policy_loss(logp, torch.tensor([beh_by_token(t) for t, _, _ in toks], dtype=torch.float64),
                      torch.tensor([a for _, _, a in toks], dtype=torch.float64),
                      torch.tensor([w for _, w, _ in toks], dtype=torch.float64))
    out.loss.backward()
    return {t: float(theta.grad[pos[t]]) for t in ids}, len(samples)


@settings(max_examples=60, deadline=None)
@given(rollouts_st, st.lists(st.floats(-2, 2), min_size=4, max_size=4))
def test_rollout_normalization_gradient_invariant_to_splitting(spec, advs):
    beh = lambda t: -1.0 - 0.05 * (t % 7)  # noqa: E731 - behaviour logprob per token id
    merged, n_merged = _grad(spec, False, advs, beh)
    split, n_split = _grad(spec, True, advs, beh)
    assert n_merged == len(spec)  # without breaks every rollout is one sample
    assert merged.keys() == split.keys()
    for t in merged:
        assert split[t] == pytest.approx(merged[t], abs=1e-12)


def test_entropy_bonus_is_subtracted_per_token_and_its_gradient_opens_the_distribution():
    logits = torch.tensor([[3.0, 0.0, 0.0]], requires_grad=True)
    lp = torch.log_softmax(logits, -1)
    entropy = -(lp.exp() * lp).sum(-1)
    logp = lp[:, 0]
    out = policy_loss(logp, logp.detach(), torch.zeros(1), torch.ones(1), entropy=entropy, entropy_coef=0.5)
    assert float(out.loss.detach()) == pytest.approx(-0.5 * float(entropy.detach()))
    out.loss.backward()
    assert logits.grad[0, 0] > 0 > logits.grad[0, 1]  # descending lowers the peaked logit: entropy rises
    off = policy_loss(logp.detach(), logp.detach(), torch.zeros(1), torch.ones(1), entropy=entropy.detach())
    assert float(off.loss) == 0.0  # coef 0 (the default): no bonus
