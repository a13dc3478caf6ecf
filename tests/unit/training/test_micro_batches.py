"""Packing is only allowed if it changes nothing: packed logprobs must equal per-sample logprobs."""

from __future__ import annotations

import random

import torch

from harnessrl.training.forward import token_logprobs
from harnessrl.training.losses import token_weights
from harnessrl.training.micro_batches import make_micro_batches

from ._helpers import VOCAB, make_sample


def _samples(n: int, seed: int = 1) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(3, 40)
        toks = [rng.randrange(VOCAB) for _ in range(length)]
        mask = [0] + [rng.randint(0, 1) for _ in range(length - 1)]
        mask[-1] = 1
        out.append(make_sample(toks, mask, rollout_id=f"r{i % 3}"))
    return out


def _logprobs(model, samples, budget, mode):
    w = token_weights(samples, "token")
    result: dict[tuple[int, int], float] = {}
    for mb in make_micro_batches(samples, w, budget, mode):
        with torch.no_grad():
            lp, _ = token_logprobs(model, mb, torch.device("cpu"))
        k = 0
        for i in mb.sample_indices:
            for t in range(1, len(samples[i].token_ids)):
                if samples[i].loss_mask[t]:
                    result[(i, t)] = float(lp[k])
                    k += 1
        assert k == lp.numel()
    return result


def test_packed_equals_unpacked(tiny_model):
    tiny_model.eval()
    samples = _samples(9)
    alone = _logprobs(tiny_model, samples, budget=1, mode="packed")  # budget 1: one sample per micro-batch
    packed = _logprobs(tiny_model, samples, budget=120, mode="packed")
    padded = _logprobs(tiny_model, samples, budget=120, mode="padded")
    assert alone.keys() == packed.keys() == padded.keys()
    assert max(abs(alone[k] - packed[k]) for k in alone) < 1e-4
    assert max(abs(alone[k] - padded[k]) for k in alone) < 1e-4


def test_micro_batches_respect_budget_and_cover_every_sample():
    samples = _samples(20, seed=3)
    mbs = make_micro_batches(samples, token_weights(samples, "rollout"), 64, "packed")
    seen = sorted(i for mb in mbs for i in mb.sample_indices)
    assert seen == list(range(20))
    for mb in mbs:
        assert mb.attention_mask is None and mb.input_ids.shape[0] == 1
        assert mb.num_tokens <= 64 or len(mb.sample_indices) == 1
        # positions restart at 0 for every packed sample
        assert int((mb.position_ids[0] == 0).sum()) == len(mb.sample_indices)
    total_w = sum(float(mb.weights.sum()) for mb in mbs)
    assert abs(total_w - 1.0) < 1e-5
    padded = make_micro_batches(samples, token_weights(samples, "rollout"), 64, "padded")
    for mb in padded:
        assert mb.input_ids.numel() <= 64 or mb.input_ids.shape[0] == 1


def test_varlen_attention_equals_unpacked_and_runs_per_sample(tiny_model, monkeypatch):
    from harnessrl.training import attention

    tiny_model.eval()
    samples = _samples(9)
    alone = _logprobs(tiny_model, samples, budget=1, mode="packed")
    tiny_model.set_attn_implementation(attention.register_varlen_attention())
    calls = []
    real = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    packed = _logprobs(tiny_model, samples, budget=120, mode="packed")
    assert max(abs(alone[k] - packed[k]) for k in alone) < 1e-5
    assert len(calls) == len(samples) * tiny_model.config.num_hidden_layers  # one causal sdpa per sample
    padded = _logprobs(tiny_model, samples, budget=120, mode="padded")  # no cu_seq_lens: plain sdpa + mask
    assert max(abs(alone[k] - padded[k]) for k in alone) < 1e-4


def _group_samples(seed: int = 5) -> list:
    """Two tasks x three attempts: each task's attempts share its prompt, then diverge (some multi-turn)."""
    rng = random.Random(seed)
    out = []
    for g in range(2):
        prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(12, 30))]
        for a in range(3):
            toks, mask = list(prompt), [0] * len(prompt)
            for _ in range(rng.randint(1, 3)):
                n = rng.randint(1, 8)
                toks += [rng.randrange(VOCAB) for _ in range(n)]
                mask += [1] * n
                ctx = rng.randint(0, 5)
                toks += [rng.randrange(VOCAB) for _ in range(ctx)]
                mask += [0] * ctx
            out.append(make_sample(toks, mask, rollout_id=f"r{g}{a}", group_id=f"g{g}"))
    out.append(make_sample([1, 2, 3, 4], [0, 0, 1, 1], rollout_id="solo", group_id="g9"))
    return out


def test_shared_prefix_packing_equals_unpacked(tiny_model):
    from harnessrl.training import attention

    tiny_model.eval()
    samples = _group_samples()
    alone = _logprobs(tiny_model, samples, budget=1, mode="packed")
    tiny_model.set_attn_implementation(attention.register_varlen_attention())
    w = token_weights(samples, "rollout")
    mbs = make_micro_batches(samples, w, 400, "packed", share_prefix_min=8)
    assert all(mb.blocks is not None for mb in mbs)
    computed = sum(mb.computed_tokens for mb in mbs)
    assert computed < sum(len(s.token_ids) for s in samples) - 2 * 2 * 12  # each prompt stored once, not 3x
    got: dict[tuple[int, int], float] = {}
    for mb in mbs:
        with torch.no_grad():
            lp, _ = token_logprobs(tiny_model, mb, torch.device("cpu"))
        k = 0
        for i in mb.sample_indices:
            for t in range(1, len(samples[i].token_ids)):
                if samples[i].loss_mask[t]:
                    got[(i, t)] = float(lp[k])
                    k += 1
    assert got.keys() == alone.keys()
    assert max(abs(alone[k] - got[k]) for k in alone) < 1e-4
    # a tight budget repeats the prefix per chunk but stays exact
    small = make_micro_batches(samples, w, 60, "packed", share_prefix_min=8)
    assert len(small) > len(mbs)
    assert all(mb.computed_tokens <= 60 or len(mb.sample_indices) == 1 for mb in small)


def test_shared_prefix_needs_varlen_attention(tiny_model):
    samples = _group_samples()
    (mb, *_) = make_micro_batches(samples, token_weights(samples, "token"), 400, "packed", share_prefix_min=8)
    import pytest

    with pytest.raises(ValueError, match="harnessrl_varlen"):
        token_logprobs(tiny_model, mb, torch.device("cpu"))
