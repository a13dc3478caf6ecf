"""Between rollouts and a training step the engine drops its prefix caches and keeps serving the same answers."""

from __future__ import annotations

from harnessrl.engines.embedded import SamplingParams


def test_release_memory_empties_the_prefix_cache_and_serving_goes_on(engine):
    prompt = list(range(5, 60))
    params = SamplingParams(max_tokens=8, temperature=0.0)
    first = engine.generate(prompt, params).choices[0].token_ids
    assert engine._prefix.tokens > 0  # the finished sequence's KV was kept for reuse
    version = engine.version
    engine.release_memory()
    assert engine._prefix.tokens == 0 and engine._prefix.lookup(prompt + [1]) == (0, None)
    assert engine.version == version  # releasing memory is not a publish
    again = engine.generate(prompt, params).choices[0].token_ids  # re-prefilled from scratch: same tokens
    assert again == first


def test_release_memory_waits_for_requests_in_flight(engine):
    handle = engine.submit(list(range(5, 40)), SamplingParams(max_tokens=32, ignore_eos=True, temperature=0.0))
    engine.release_memory()  # drains: the request finishes whole, not cut off
    assert len(handle.result(60).choices[0].token_ids) == 32
