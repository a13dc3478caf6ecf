"""The batched sampler draws from exactly the distribution whose logprobs it reports, row by row."""

from __future__ import annotations

import math

import pytest
import torch

from harnessrl.engines.embedded.sampling import SamplingParams, processed_logprobs, sample_rows


def _frequencies(logits: torch.Tensor, params: SamplingParams, draws: int) -> torch.Tensor:
    """Token frequencies of ``draws`` rows with the same logits, each with its own seeded generator."""
    rows = logits.expand(draws, -1)
    picks = sample_rows(rows, [params] * draws, [torch.Generator().manual_seed(i) for i in range(draws)])
    counts = torch.bincount(torch.tensor([t for t, _, _ in picks]), minlength=logits.shape[-1])
    return counts.double() / draws


@pytest.mark.parametrize("params", [SamplingParams(temperature=1.0), SamplingParams(temperature=0.6, top_k=3),
                                    SamplingParams(temperature=1.3, top_p=0.8)])
def test_draws_follow_the_reported_distribution(params: SamplingParams) -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    expected = processed_logprobs(logits, params).exp().double()
    freq = _frequencies(logits, params, 20_000)
    # 20k draws: a frequency's standard error is at most 0.0036, so 0.015 is over four of them
    assert torch.allclose(freq, expected, atol=0.015), (freq, expected)
    assert bool((freq[expected == 0] == 0).all())  # masked tokens (top-k / top-p) are never drawn


def test_reported_logprob_is_the_drawn_tokens() -> None:
    torch.manual_seed(0)
    logits = torch.randn(5, 50)
    params = [SamplingParams(temperature=t) for t in (1.0, 0.7, 1.0, 0.0, 0.7)]
    params[1].top_logprobs = 3
    picks = sample_rows(logits, params, [torch.Generator().manual_seed(i) for i in range(5)])
    for row, (token, logprob, top) in enumerate(picks):
        logp = processed_logprobs(logits[row], params[row])
        assert math.isclose(logprob, float(logp[token]), rel_tol=0, abs_tol=1e-6)
        assert len(top) == params[row].top_logprobs
    assert picks[3][0] == int(torch.argmax(logits[3]))  # greedy row


def test_a_rows_draw_does_not_depend_on_the_other_rows() -> None:
    torch.manual_seed(1)
    logits = torch.randn(4, 64)
    params = [SamplingParams(temperature=1.0), SamplingParams(temperature=0.5, top_k=10),
              SamplingParams(temperature=1.0), SamplingParams(temperature=0.0)]
    together = sample_rows(logits, params, [torch.Generator().manual_seed(40 + i) for i in range(4)])
    for row in range(4):
        alone = sample_rows(logits[row : row + 1], [params[row]], [torch.Generator().manual_seed(40 + row)])
        assert alone[0] == together[row]
