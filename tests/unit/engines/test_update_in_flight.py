"""Generations that survive a weight update (``[engine] on_update = "continue"``): the update happens between
two decode steps instead of after every generation in flight, each generation continues on the new weights
from the tokens it already sampled, and every token says which version sampled it -- with logprobs that are
exactly that version's (what the trainer's per-token importance weights need)."""

from __future__ import annotations

import threading
import time

import torch

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams


def _forward_logprobs(model, prompt, completion):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def _started(handle, tokens: int) -> None:
    """Wait until ``handle`` has streamed ``tokens`` tokens (admitted, then one event per token)."""
    deadline = time.monotonic() + 30
    while handle._sync.qsize() < tokens + 1 and time.monotonic() < deadline:
        time.sleep(0.005)


def test_an_update_does_not_wait_for_a_long_generation_which_continues_on_the_new_weights(tiny):
    model, tokenizer = tiny
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256,
                                                           on_update="continue"))
    original = {k: v.clone() for k, v in model.state_dict().items()}
    prompt = tokenizer.encode("hello world")
    try:
        long = engine.submit(prompt, SamplingParams(max_tokens=180, temperature=1.0, seed=3, ignore_eos=True))
        _started(long, 5)
        old_weights = {k: v.clone() for k, v in model.state_dict().items()}
        perturbed = {k: v + 0.05 * torch.randn_like(v) for k, v in original.items()}
        t0 = time.perf_counter()
        assert engine.update_weights(perturbed) == 1
        took = time.perf_counter() - t0
        out = long.result(60)
        (choice,) = out.choices
        assert out.policy_version == 0  # admitted under version 0 ...
        runs = choice.versions  # ... and sampled under both: who sampled each token, in order
        assert [v for v, _ in runs] == [0, 1] and sum(n for _, n in runs) == len(choice.token_ids) == 180
        before = runs[0][1]
        assert 5 <= before < 180, runs
        assert took < 5.0, f"the update waited {took:.1f}s: it should not wait for the generation to finish"
        assert engine.stats["recomputed_tokens"] == len(prompt) + before - 1  # its KV, computed again
        tokens, logprobs = choice.token_ids, choice.logprobs
        new_lp = _forward_logprobs(model, prompt, tokens)  # the model now holds the new weights
        model.load_state_dict(old_weights)
        old_lp = _forward_logprobs(model, prompt, tokens)
        model.load_state_dict(perturbed)
        # each token's logprob is that of the version that sampled it (the trainer's behaviour logprob)
        assert max(abs(a - b) for a, b in zip(old_lp[:before], logprobs[:before], strict=True)) < 1e-4
        assert max(abs(a - b) for a, b in zip(new_lp[before:], logprobs[before:], strict=True)) < 1e-4
        assert max(abs(a - b) for a, b in zip(new_lp[:before], logprobs[:before], strict=True)) > 1e-3
        after = engine.generate(prompt, SamplingParams(max_tokens=8, temperature=1.0, seed=4, ignore_eos=True))
        assert after.policy_version == 1 and after.choices[0].versions == [[1, 8]]
    finally:
        engine.close()
        model.load_state_dict(original)


def test_by_default_an_update_still_drains_and_every_token_is_the_old_version(engine, tiny):
    model, tokenizer = tiny
    original = {k: v.clone() for k, v in model.state_dict().items()}
    prompt = tokenizer.encode("what is")
    try:
        long = engine.submit(prompt, SamplingParams(max_tokens=60, temperature=1.0, seed=5, ignore_eos=True))
        _started(long, 3)
        t = threading.Thread(target=engine.update_weights,
                             args=({k: v + 0.05 * torch.randn_like(v) for k, v in original.items()},))
        t.start()
        out = long.result(60)
        t.join(60)
        assert out.choices[0].versions == [[0, 60]] and engine.version == 1
        assert engine.stats["recomputed_tokens"] == 0
    finally:
        model.load_state_dict(original)


def test_a_request_still_prefilling_at_the_update_prefills_again_on_the_new_weights(tiny):
    model, tokenizer = tiny
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256,
                                                           prefill_chunk=16, on_update="continue"))
    original = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        busy = engine.submit(tokenizer.encode("a"), SamplingParams(max_tokens=150, ignore_eos=True, seed=1))
        _started(busy, 3)
        prompt = tokenizer.encode("hello world " * 15)  # several prefill chunks
        late = engine.submit(prompt, SamplingParams(max_tokens=6, temperature=1.0, seed=2, ignore_eos=True))
        perturbed = {k: v + 0.05 * torch.randn_like(v) for k, v in original.items()}
        engine.update_weights(perturbed)
        out = late.result(60)
        busy.result(60)
        runs = out.choices[0].versions
        assert sum(n for _, n in runs) == 6
        first_new = sum(n for v, n in runs if v == 0)
        lp = _forward_logprobs(model, prompt, out.choices[0].token_ids)
        assert max(abs(a - b) for a, b in zip(lp[first_new:], out.choices[0].logprobs[first_new:],
                                              strict=True)) < 1e-4
    finally:
        engine.close()
        model.load_state_dict(original)
