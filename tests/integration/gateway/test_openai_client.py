"""The official openai client (sync, async, streaming, tools, completions) through the gateway.

Each test checks what the harness saw against what the store recorded, token for token, and both
against the engine's deterministic tokenizer.
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from fakes.fake_engine import END, FakeEngine, logprob_of, render_chat
from pytest import approx

from harnessrl.types import ApiKind, CallStatus, Fidelity

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object",
                                                          "properties": {"n": {"type": "integer"}}}}}]


def client(r) -> openai.OpenAI:
    return openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)


def expected_tokens(prompt: list[int], max_tokens: int, n: int = 1) -> list[list[int]]:
    eng = FakeEngine()
    return [eng.generate(prompt, {"max_tokens": max_tokens}, i)[0] for i in range(n)]


def test_sync_chat_recorded_token_exact(gw):
    r = gw.rollout()
    resp = client(r).chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=64)
    content = resp.choices[0].message.content
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "gpt-4o"
    assert resp.choices[0].logprobs is None  # not asked for: stripped
    assert "prompt_token_ids" not in (resp.model_extra or {})
    (call,) = gw.store.get_calls(r.id)
    prompt = render_chat(MESSAGES)
    assert call.status == CallStatus.OK and call.api == ApiKind.CHAT
    assert call.prompt_token_ids == prompt
    assert call.completion_token_ids == expected_tokens(prompt, 64)[0]
    assert call.completion_token_ids == [*content.encode(), END]
    assert call.completion_logprobs == approx([logprob_of(t) for t in call.completion_token_ids])
    assert call.requested_model == "gpt-4o"
    assert call.sampling["max_tokens"] == 64
    assert call.engine_id == "engine-0" and call.latency_s > 0
    assert call.fidelity == Fidelity.RERENDERED
    sent = gw.engine.requests[-1]
    assert sent["return_token_ids"] is True and sent["logprobs"] is True and sent["model"] == "fake-model"


def test_logprobs_returned_when_asked_and_multi_turn_extends(gw):
    r = gw.rollout()
    c = client(r)
    msgs = list(MESSAGES)
    resp = c.chat.completions.create(model="m", messages=msgs, logprobs=True, temperature=0.7, top_p=0.9)
    lps = [e.logprob for e in resp.choices[0].logprobs.content]
    msgs += [{"role": "assistant", "content": resp.choices[0].message.content},
             {"role": "user", "content": "again"}]
    c.chat.completions.create(model="m", messages=msgs)
    first, second = gw.store.get_calls(r.id)
    assert first.completion_logprobs == approx(lps)
    assert first.sampling["temperature"] == 0.7 and first.sampling["top_p"] == 0.9
    assert second.prompt_token_ids[: len(first.prompt_token_ids) + len(first.completion_token_ids)] == \
        first.prompt_token_ids + first.completion_token_ids
    assert second.fidelity == Fidelity.EXTENDED


def test_async_client_n_choices_all_recorded(gw):
    r = gw.rollout()

    async def go():
        async with openai.AsyncOpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0) as c:
            return await c.chat.completions.create(model="x", messages=MESSAGES, n=3, max_tokens=8)

    resp = asyncio.run(go())
    assert len(resp.choices) == 3
    (call,) = gw.store.get_calls(r.id)
    prompt = render_chat(MESSAGES)
    assert [c.token_ids for c in call.choices] == expected_tokens(prompt, 8, 3)
    assert [c.finish_reason for c in call.choices] == ["length"] * 3
    assert [bytes(c.token_ids).decode() for c in call.choices] == [c.message.content for c in resp.choices]


def test_streaming_chat_recorded_like_non_streamed(gw):
    r = gw.rollout()
    stream = client(r).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True,
                                               stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 17
    assert all("token_ids" not in (ch.choices[0].model_extra or {}) for ch in chunks if ch.choices)
    (call,) = gw.store.get_calls(r.id)
    prompt = render_chat(MESSAGES)
    assert call.prompt_token_ids == prompt
    assert call.completion_token_ids == expected_tokens(prompt, 4096)[0] == [*text.encode(), END]
    assert call.completion_logprobs == approx([logprob_of(t) for t in call.completion_token_ids])
    assert call.response["choices"][0]["message"]["content"] == text
    assert call.choices[0].finish_reason == "stop"


def test_tools_pass_through_and_tool_loop(gw):
    r = gw.rollout()
    c = client(r)
    resp = c.chat.completions.create(model="gpt-4o", messages=MESSAGES, tools=TOOLS)
    tc = resp.choices[0].message.tool_calls[0]
    assert resp.choices[0].finish_reason == "tool_calls" and tc.function.name == "bash"
    assert gw.engine.requests[-1]["tools"] == TOOLS
    msgs = MESSAGES + [resp.choices[0].message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": tc.id, "content": "ok"}]
    # streamed tool call accumulates into the stored response
    chunks = list(c.chat.completions.create(model="gpt-4o", messages=MESSAGES, tools=TOOLS, stream=True))
    args = "".join(ch.choices[0].delta.tool_calls[0].function.arguments or "" for ch in chunks
                   if ch.choices and ch.choices[0].delta.tool_calls)
    assert args == tc.function.arguments
    final = c.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
    assert final.choices[0].finish_reason == "stop"
    calls = gw.store.get_calls(r.id)
    assert [x.choices[0].finish_reason for x in calls] == ["tool_calls", "tool_calls", "stop"]
    assert calls[1].response["choices"][0]["message"]["tool_calls"][0]["function"] == \
        {"name": "bash", "arguments": tc.function.arguments}
    assert calls[2].fidelity == Fidelity.EXTENDED  # the tool call's exact tokens are the next prefix


@pytest.mark.parametrize("stream", [False, True])
def test_completions_api(gw, stream):
    r = gw.rollout()
    c = client(r)
    if stream:
        text = "".join(ch.choices[0].text for ch in c.completions.create(
            model="m", prompt="Once upon", max_tokens=5, stream=True, logprobs=0) if ch.choices)
    else:
        resp = c.completions.create(model="m", prompt="Once upon", max_tokens=5, logprobs=0)
        text = resp.choices[0].text
        assert resp.choices[0].logprobs.token_logprobs == [logprob_of(t) for t in text.encode()]
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.COMPLETIONS
    assert call.prompt_token_ids == list(b"Once upon")
    assert call.completion_token_ids == list(text.encode()) == expected_tokens(list(b"Once upon"), 5)[0]


def test_token_id_prompt_and_models(gw):
    r = gw.rollout()
    c = client(r)
    c.completions.create(model="m", prompt=[1, 2, 3], max_tokens=3)
    assert gw.store.get_calls(r.id)[0].prompt_token_ids == [1, 2, 3]
    assert [m.id for m in c.models.list()] == ["policy"]
