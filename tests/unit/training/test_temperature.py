"""Tokens sampled at a temperature are scored by the trainer under that same tempered distribution.

Without this the PPO ratio starts away from 1 for every token of a harness that sets its own
temperature (or a controller that pins one), and clipping fires on data that is perfectly on-policy.
"""

from __future__ import annotations

import torch

from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
from harnessrl.models import tiny_model
from harnessrl.training.forward import token_logprobs
from harnessrl.training.losses import token_weights
from harnessrl.training.micro_batches import make_micro_batches
from harnessrl.training.samples import build_samples
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens


def _call(index: int, prompt: list[int], out_ids: list[int], out_lp: list[float], temperature: float | None) -> Call:
    sampling = {} if temperature is None else {"temperature": temperature}
    return Call(rollout_id="r", index=index, api=ApiKind.COMPLETIONS, status=CallStatus.OK, request={},
                response=None, prompt_token_ids=prompt, choices=[ChoiceTokens(out_ids, out_lp)],
                policy_version=0, sampling=sampling)


def test_trainer_logprobs_match_engine_logprobs_at_the_sampling_temperature() -> None:
    model, tok = tiny_model()
    engine = EmbeddedEngine(model, tok)
    try:
        calls = []
        for i, (text, temp) in enumerate((("what is the capital of France", 0.5), ("hello world", 1.7))):
            prompt = tok.encode(text)  # two unrelated prompts: two samples, one per temperature
            out = engine.generate(prompt, SamplingParams(temperature=temp, max_tokens=12, seed=i, ignore_eos=True))
            ch = out.choices[0]
            calls.append(_call(i, prompt, ch.token_ids, ch.logprobs, temp))
    finally:
        engine.close()
    samples = build_samples(calls, "g").samples
    assert len(samples) == 2 and all(s.temperatures is not None for s in samples)
    [mb] = make_micro_batches(samples, token_weights(samples, "token"), 10_000, "padded", 0)
    with torch.no_grad():
        logp, _ = token_logprobs(model, mb, torch.device("cpu"))
    assert torch.allclose(logp, mb.behaviour_logprobs, atol=1e-3), (logp - mb.behaviour_logprobs).abs().max()
    mb.temperatures = None  # scored at temperature 1 the same tokens disagree: the scaling matters
    with torch.no_grad():
        untempered, _ = token_logprobs(model, mb, torch.device("cpu"))
    assert (untempered - mb.behaviour_logprobs).abs().max() > 1e-2


def test_greedy_calls_are_excluded_and_default_temperature_is_one() -> None:
    greedy = _call(0, [1, 2, 3], [4, 5], [0.0, 0.0], 0.0)
    default = _call(1, [9, 9], [4], [-1.0], None)
    built = build_samples([greedy, default], "g")
    assert built.counts["excluded.greedy"] == 1
    [sample] = built.samples
    assert sample.temperatures is None and sample.call_indices == [1]
