"""The embedded engine on the tiny random model: exactness of tokens and logprobs, scheduling, bad input."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from harnessrl.engines.embedded import InvalidRequestError, SamplingParams


def forward_logprobs(model, prompt, completion, temperature=1.0):
    """Logprobs of ``completion`` given ``prompt`` from one plain forward pass (the trainer's view)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    lp = torch.log_softmax(logits / temperature, dim=-1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def prompts_of(tokenizer, k):
    return [tokenizer.encode("hello world " * (i + 1) + "what is") for i in range(k)]


def test_logprobs_match_forward_pass_across_a_padded_batch(engine, tiny):
    model, tokenizer = tiny
    prompts = prompts_of(tokenizer, 6)  # different lengths -> left padding; 6 > max_batch -> joins/leaves
    handles = [
        engine.submit(p, SamplingParams(max_tokens=12 + 3 * i, temperature=0.7, seed=i, ignore_eos=True))
        for i, p in enumerate(prompts)
    ]
    worst = 0.0
    for i, (p, h) in enumerate(zip(prompts, handles, strict=True)):
        choice = h.result(60).choices[0]
        assert len(choice.token_ids) == 12 + 3 * i and choice.finish_reason == "length"
        ref = forward_logprobs(model, p, choice.token_ids, temperature=0.7)
        worst = max(worst, max(abs(a - b) for a, b in zip(ref, choice.logprobs, strict=True)))
        assert tokenizer.decode(choice.token_ids, skip_special_tokens=True) == choice.text
    assert worst < 1e-4
    assert engine.stats["max_batch_seen"] <= 4


def test_greedy_matches_transformers_generate(engine, tiny):
    model, tokenizer = tiny
    prompt = tokenizer.encode("the quick brown fox")
    out = engine.generate(prompt, SamplingParams(max_tokens=15, temperature=0, ignore_eos=True))
    with torch.no_grad():
        ref = model.generate(torch.tensor([prompt]), max_new_tokens=15, do_sample=False, min_new_tokens=15)
    assert out.choices[0].token_ids == ref[0, len(prompt) :].tolist()
    # greedy reports the model's own (temperature 1) distribution
    expected = forward_logprobs(model, prompt, out.choices[0].token_ids)
    assert max(abs(a - b) for a, b in zip(expected, out.choices[0].logprobs, strict=True)) < 1e-4


def test_seeded_samples_do_not_depend_on_batch_company(engine, tiny):
    _, tokenizer = tiny
    prompt = tokenizer.encode("hello world")
    params = SamplingParams(max_tokens=20, temperature=1.0, seed=123, ignore_eos=True)
    alone = engine.generate(prompt, params).choices[0].token_ids
    others = [
        engine.submit(p, SamplingParams(max_tokens=25, ignore_eos=True)) for p in prompts_of(tokenizer, 3)
    ]
    crowded = engine.generate(prompt, params).choices[0].token_ids
    for h in others:
        h.result(60)
    assert alone == crowded


def test_n_choices_are_independent_samples(engine, tiny):
    model, tokenizer = tiny
    prompt = tokenizer.encode("what is")
    out = engine.generate(prompt, SamplingParams(n=3, max_tokens=10, seed=7, ignore_eos=True))
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in out.choices}) == 3
    for c in out.choices:
        ref = forward_logprobs(model, prompt, c.token_ids)
        assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4


def test_top_k_top_p_logprobs_are_of_the_truncated_distribution(engine, tiny):
    _, tokenizer = tiny
    out = engine.generate(
        tokenizer.encode("hello"),
        SamplingParams(
            max_tokens=10, temperature=1.0, top_k=5, top_p=0.5, seed=1, ignore_eos=True, top_logprobs=5
        ),
    )
    c = out.choices[0]
    for lp, top in zip(c.logprobs, c.top_logprobs, strict=True):
        kept = [v for _, v in top if v > float("-inf")]
        assert 1 <= len(kept) <= 5
        assert abs(sum(torch.tensor(kept).exp().tolist()) - 1.0) < 1e-4  # renormalized
        assert lp in [v for _, v in top]


def test_stop_token_and_stop_string(engine, tiny):
    _, tokenizer = tiny
    prompt = tokenizer.encode("the lazy dog")
    params = dict(max_tokens=30, temperature=1.0, seed=5, ignore_eos=True)
    ref = engine.generate(prompt, SamplingParams(**params)).choices[0]
    stop_id = ref.token_ids[4]
    first = ref.token_ids.index(stop_id)
    by_id = engine.generate(prompt, SamplingParams(**params, stop_token_ids=[stop_id])).choices[0]
    assert by_id.token_ids == ref.token_ids[: first + 1] and by_id.finish_reason == "stop"

    stop = ref.text[len(ref.text) // 2 : len(ref.text) // 2 + 3]
    cut = ref.text.find(stop)
    by_str = engine.generate(prompt, SamplingParams(**params, stop=[stop])).choices[0]
    assert by_str.finish_reason == "stop" and by_str.text == ref.text[:cut]
    # the tokens that completed the stop string are returned; their text holds the stop string
    assert tokenizer.decode(by_str.token_ids).startswith(ref.text[:cut] + stop)


@pytest.mark.parametrize("max_tokens", [0, -1])
def test_non_positive_max_tokens_is_refused(engine, max_tokens):
    with pytest.raises(InvalidRequestError, match="max_tokens"):
        engine.submit([1, 2, 3], SamplingParams(max_tokens=max_tokens))


def test_over_long_prompt_is_refused_with_the_window(engine):
    with pytest.raises(InvalidRequestError, match="maximum context length is 256") as info:
        engine.submit([5] * 300, SamplingParams(max_tokens=4))
    assert info.value.code == "context_length_exceeded"
    with pytest.raises(InvalidRequestError, match="250 in the prompt, 10 for the completion"):
        engine.submit([5] * 250, SamplingParams(max_tokens=10))
    with pytest.raises(InvalidRequestError, match="empty"):
        engine.submit([], SamplingParams(max_tokens=4))


def test_default_max_tokens_stops_at_the_window(engine):
    out = engine.generate([5] * 240, SamplingParams(ignore_eos=True))
    assert len(out.choices[0].token_ids) == 16 and out.choices[0].finish_reason == "length"


def test_a_long_generation_does_not_starve_a_short_one(engine, tiny):
    _, tokenizer = tiny
    long = engine.submit(tokenizer.encode("hello"), SamplingParams(max_tokens=200, ignore_eos=True))
    deadline = time.monotonic() + 30
    while long._sync.qsize() < 2 and time.monotonic() < deadline:  # running: admitted and decoding
        time.sleep(0.001)  # (a fixed sleep let the tiny model finish all 200 tokens first on a fast CPU)
    short = engine.submit(tokenizer.encode("world"), SamplingParams(max_tokens=3, ignore_eos=True))
    short.result(30)
    assert long._sync.qsize() < 200  # the long one is still generating when the short one is done
    assert len(long.result(60).choices[0].token_ids) == 200


def test_cancel_frees_the_slot(engine, tiny):
    _, tokenizer = tiny
    h = engine.submit(tokenizer.encode("hello"), SamplingParams(max_tokens=10_000 // 100, ignore_eos=True))
    h.cancel()
    out = h.result(30)
    assert out.choices[0].finish_reason is None or len(out.choices[0].token_ids) < 100
    ok = engine.generate(tokenizer.encode("hi"), SamplingParams(max_tokens=5, ignore_eos=True))
    assert len(ok.choices[0].token_ids) == 5


def test_a_finished_request_is_freed_without_the_cycle_collector(engine, tiny):
    """The handle reaches its request weakly: once the engine is done with it and the caller drops the handle,
    reference counting frees both (a cycle kept each request's prompt until the collector ran)."""
    import gc
    import weakref

    _, tokenizer = tiny
    gc.disable()
    try:
        h = engine.submit(tokenizer.encode("hello"), SamplingParams(max_tokens=4, ignore_eos=True))
        assert len(h.result(30).choices[0].token_ids) == 4
        gone = weakref.ref(h)
        deadline = time.monotonic() + 5
        del h
        while gone() is not None and time.monotonic() < deadline:  # the scheduler may still hold it a moment
            time.sleep(0.01)
        assert gone() is None
        h = engine.submit(tokenizer.encode("hello"), SamplingParams(max_tokens=10_000 // 100, ignore_eos=True))
        h.cancel()  # cancelling still reaches a live request
        assert len(h.result(30).choices[0].token_ids) < 100
    finally:
        gc.enable()


def test_update_waits_for_in_flight_and_bumps_version(engine, tiny):
    model, tokenizer = tiny
    prompt = tokenizer.encode("hello world")
    params = SamplingParams(max_tokens=60, temperature=1.0, seed=9, ignore_eos=True)
    reference = engine.generate(prompt, params)
    assert reference.policy_version == 0
    original = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        in_flight = engine.submit(prompt, params)
        while in_flight._sync.qsize() < 3:  # admitted and generating
            time.sleep(0.01)
        perturbed = {k: v + 0.05 * torch.randn_like(v) for k, v in original.items()}
        versions: list[int] = []
        t = threading.Thread(target=lambda: versions.append(engine.update_weights(perturbed)))
        t.start()
        old = in_flight.result(60)
        t.join(60)
        assert versions == [1] and engine.version == 1
        assert old.policy_version == 0
        assert old.choices[0].token_ids == reference.choices[0].token_ids  # old weights all the way
        new = engine.generate(prompt, params)
        assert new.policy_version == 1 and new.choices[0].token_ids != reference.choices[0].token_ids
        ref = forward_logprobs(model, prompt, new.choices[0].token_ids)
        assert max(abs(a - b) for a, b in zip(ref, new.choices[0].logprobs, strict=True)) < 1e-4
        with pytest.raises(ValueError, match="backwards"):
            engine.update_weights(original, version=0)
    finally:
        model.load_state_dict(original)


def test_shared_module_publish_inside_paused(engine, tiny):
    model, tokenizer = tiny
    prompt = tokenizer.encode("what is")
    original = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        with engine.paused(version=5):  # the trainer's optimizer.step() goes here
            with torch.no_grad():
                model.model.layers[0].mlp.down_proj.weight.mul_(3.0)
        assert engine.version == 5
        out = engine.generate(prompt, SamplingParams(max_tokens=8, seed=0, ignore_eos=True))
        assert out.policy_version == 5
        ref = forward_logprobs(model, prompt, out.choices[0].token_ids)
        assert max(abs(a - b) for a, b in zip(ref, out.choices[0].logprobs, strict=True)) < 1e-4
    finally:
        model.load_state_dict(original)


def test_chunked_prefill_of_a_long_prompt_is_exact_and_interleaves(tiny):
    from harnessrl.engines.config import EngineConfig
    from harnessrl.engines.embedded import EmbeddedEngine

    model, tokenizer = tiny
    eng = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", prefill_chunk=16, context_window=512))
    try:
        running = eng.submit(tokenizer.encode("hi"), SamplingParams(max_tokens=60, ignore_eos=True))
        while running._sync.qsize() < 2:
            time.sleep(0.01)
        prompt = tokenizer.encode("the quick brown fox jumps over the lazy dog " * 12)
        assert len(prompt) > 5 * 16
        steps_before = eng.stats["steps"]
        out = eng.generate(prompt, SamplingParams(max_tokens=5, temperature=0.9, seed=4, ignore_eos=True))
        # decode steps of the running request continued while the long prompt was prefilled chunk by chunk
        assert eng.stats["steps"] - steps_before >= len(prompt) // 16
        ref = forward_logprobs(model, prompt, out.choices[0].token_ids, temperature=0.9)
        assert max(abs(a - b) for a, b in zip(ref, out.choices[0].logprobs, strict=True)) < 1e-4
        running.result(60)
    finally:
        eng.close()


def test_prefix_cache_skips_the_shared_history_and_stays_exact(engine, tiny):
    model, tokenizer = tiny
    first_prompt = tokenizer.encode("the quick brown fox jumps over the lazy dog " * 3)
    first = engine.generate(first_prompt, SamplingParams(max_tokens=10, seed=1, ignore_eos=True)).choices[0]
    # the next turn resends the history (prompt + completion) plus a new message
    second_prompt = first_prompt + first.token_ids + tokenizer.encode(" what is the answer")
    reused_before, prefilled_before = engine.stats["reused_prefix_tokens"], engine.stats["prefill_tokens"]
    second = engine.generate(
        second_prompt, SamplingParams(max_tokens=8, temperature=0.8, seed=2, ignore_eos=True)
    )
    reused = engine.stats["reused_prefix_tokens"] - reused_before
    assert reused == len(first_prompt) + len(first.token_ids) - 1  # all but the last sampled token
    assert engine.stats["prefill_tokens"] - prefilled_before == len(second_prompt) - reused
    ref = forward_logprobs(model, second_prompt, second.choices[0].token_ids, temperature=0.8)
    assert max(abs(a - b) for a, b in zip(ref, second.choices[0].logprobs, strict=True)) < 1e-4

    original = {k: v.clone() for k, v in model.state_dict().items()}
    try:  # new weights make old KV wrong: the cache is dropped
        engine.update_weights({k: v * 1.01 for k, v in original.items()})
        reused_before = engine.stats["reused_prefix_tokens"]
        engine.generate(second_prompt, SamplingParams(max_tokens=2))
        assert engine.stats["reused_prefix_tokens"] == reused_before
    finally:
        model.load_state_dict(original)


def test_interpreter_exit_hook_stops_the_scheduler_thread(engine):
    """A daemon thread left inside torch at finalization aborts the process; the atexit hook stops it first."""
    from harnessrl.engines.embedded import engine as engine_module

    assert engine in engine_module._LIVE_ENGINES
    assert engine._thread.is_alive()
    engine_module._close_live_engines()
    assert not engine._thread.is_alive()
