"""Async consumption: per-token deltas add up to the final output; stop strings never leak into the stream."""

from __future__ import annotations

import asyncio

from harnessrl.engines.embedded import SamplingParams
from harnessrl.engines.embedded.outputs import Admitted, Delta
from harnessrl.engines.embedded.sequence import _find_stop, _stable_prefix


def test_stream_deltas_concatenate_to_the_result(engine, tiny):
    _, tokenizer = tiny
    prompt = tokenizer.encode("the quick brown")
    params = SamplingParams(max_tokens=25, n=2, seed=11, ignore_eos=True)
    final = engine.generate(prompt, params)

    async def consume():
        handle = engine.submit(prompt, params, loop=asyncio.get_running_loop())
        events = [ev async for ev in handle.events()]
        return events

    events = asyncio.run(consume())
    assert isinstance(events[0], Admitted) and events[0].prompt_token_ids == prompt
    for choice in final.choices:
        deltas = [e for e in events if isinstance(e, Delta) and e.index == choice.index]
        assert all(len(d.token_ids) == 1 for d in deltas)
        assert sum((d.token_ids for d in deltas), []) == choice.token_ids
        assert "".join(d.text for d in deltas) == choice.text
        assert deltas[-1].finish_reason == "length" and all(d.finish_reason is None for d in deltas[:-1])


def test_stable_prefix_holds_back_partial_stops_and_broken_utf8():
    assert _stable_prefix("hello wor", ["world"]) == "hello "
    assert _stable_prefix("hello", ["xyz"]) == "hello"
    assert _stable_prefix("caf\ufffd", []) == "caf"
    assert _find_stop("a STOP b END", ["END", "STOP"], include=False) == 2
    assert _find_stop("a STOP b", ["STOP"], include=True) == 6
    assert _find_stop("abc", ["x"], include=False) is None
