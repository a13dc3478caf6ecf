"""Tokens reach the harness as the engine samples them, in every API and both render modes.

The fake engine waits between tokens; the harness must see its first text long before the last token
is sampled, in many pieces, and the record must hold exactly what it was sent.
"""

from __future__ import annotations

import time

import httpx
import orjson
import pytest
from fakes.fake_engine import EngineServer, FakeEngine

DELAY = 0.04  # seconds between the engine's chunks (17+ chunks: ~0.7 s a call)
BODIES = {
    "chat": ("/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
    "completions": ("/completions", {"model": "m", "stream": True, "prompt": "hello"}),
    "anthropic": ("/messages", {"model": "claude", "stream": True, "max_tokens": 64,
                                "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/responses", {"model": "m", "stream": True, "input": "hi"}),
}


def _text_of(api: str, data: dict) -> str | None:
    """The text a stream event adds, or None when it adds none."""
    if api == "chat":
        ch = data.get("choices") or [{}]
        return (ch[0].get("delta") or {}).get("content") or None
    if api == "completions":
        ch = data.get("choices") or [{}]
        return ch[0].get("text") or None
    if api == "anthropic":
        return data.get("delta", {}).get("text") if data.get("type") == "content_block_delta" else None
    return data.get("delta") if data.get("type") == "response.output_text.delta" else None


def _stream(url: str, key: str, body: dict, api: str) -> tuple[list[tuple[float, str]], float, float]:
    """(timed text pieces, time of the first byte, total time)."""
    pieces: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    first_byte = None
    with httpx.stream("POST", url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if first_byte is None:
                first_byte = time.perf_counter() - t0
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            text = _text_of(api, orjson.loads(line[6:]))
            if text:
                pieces.append((time.perf_counter() - t0, text))
    return pieces, first_byte or 0.0, time.perf_counter() - t0


def _check(gw, api: str) -> None:
    gw.engine.token_delay_s = DELAY
    r = gw.rollout()
    path, body = BODIES[api]
    pieces, first_byte, total = _stream(f"{r.base_url}{path}", r.api_key, body, api)
    assert total > 8 * DELAY
    assert len(pieces) >= 3, pieces
    # the text arrives spread over the sampling time, not in one burst at the end (robust to a loaded machine)
    assert pieces[-1][0] - pieces[0][0] > 5 * DELAY, (pieces[0][0], pieces[-1][0], total)
    assert first_byte < total - 5 * DELAY, (first_byte, total)
    (call,) = gw.store.get_calls(r.id)
    text = "".join(t for _, t in pieces)
    resp = call.response
    if api == "chat":
        assert resp["choices"][0]["message"]["content"] == text
    elif api == "completions":
        assert resp["choices"][0]["text"] == text
    elif api == "anthropic":
        assert resp["content"][0]["text"] == text and resp["stop_reason"] in ("end_turn", "max_tokens")
    else:
        assert resp["output"][0]["content"][0]["text"] == text and resp["status"] in ("completed", "incomplete")
    assert call.completion_token_ids and call.prompt_token_ids


@pytest.mark.parametrize("api", list(BODIES))
def test_engine_render_mode_streams_as_sampled(gw, api):
    _check(gw, api)


class TextEngine(FakeEngine):
    """Samples token ids that spell words in the renderer's tokenizer (the fake's own ids are bytes)."""

    def __init__(self, ids: list[int]) -> None:
        super().__init__()
        self.ids = ids

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        return list(self.ids), "stop", None


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_gateway_render_mode_streams_as_sampled(make_gateway, api):
    pytest.importorskip("transformers")
    from harnessrl.gateway.render import RenderConfig
    from harnessrl.gateway.render.factory import load_tokenizer

    ids = load_tokenizer("tiny").encode("the quick brown fox jumps over the lazy dog " * 3, add_special_tokens=False)
    srv = EngineServer(TextEngine(ids)).start()
    try:
        gw = make_gateway(engines=[srv], render_mode="gateway", render=RenderConfig(tokenizer="tiny"))
        _check(gw, api)
        assert isinstance(gw.engine.requests[-1]["prompt"], list)  # token ids went to /completions
        assert gw.store.get_calls(gw.store.list_rollouts()[0].id)[0].completion_token_ids == ids
    finally:
        srv.stop()


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_engine_failing_mid_stream_ends_in_the_apis_own_error_event_and_is_recorded(gw, api):
    r = gw.rollout()
    gw.engine.break_stream_after = 6  # some text reached the harness, then the engine dies
    path, body = BODIES[api]
    with httpx.stream("POST", f"{r.base_url}{path}", json=body, headers={"Authorization": f"Bearer {r.api_key}"},
                      timeout=30) as resp:
        assert resp.status_code == 200
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    last = orjson.loads(lines[-1][6:])
    if api == "anthropic":
        assert last["type"] == "error" and "mid-stream" in last["error"]["message"]
        assert not any('"message_stop"' in line for line in lines)
    else:
        assert last["type"] == "response.failed" and "mid-stream" in last["response"]["error"]["message"]
        seq = [orjson.loads(line[6:])["sequence_number"] for line in lines]
        assert seq == list(range(len(seq)))
    (call,) = gw.store.get_calls(r.id)
    assert call.status.value == "error" and call.completion_token_ids  # what was sampled is kept


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_render_mode_thinking_streams_as_the_apis_reasoning(make_gateway, api):
    pytest.importorskip("transformers")
    from pathlib import Path

    from harnessrl.gateway.render import RenderConfig
    from harnessrl.gateway.render.factory import load_tokenizer

    template = Path(__file__).parents[2] / "unit" / "render" / "templates" / "qwen3.jinja"
    tok = load_tokenizer("smollm2")
    ids = tok.encode("<think>\nThe user greets me.\n</think>\n\nHello there, friend!", add_special_tokens=False)
    srv = EngineServer(TextEngine([*ids, tok.convert_tokens_to_ids("<|im_end|>")])).start()
    try:
        gw = make_gateway(engines=[srv], render_mode="gateway",
                          render=RenderConfig(tokenizer="smollm2", chat_template=str(template)))
        r = gw.rollout()
        path, body = BODIES[api]
        with httpx.stream("POST", f"{r.base_url}{path}", json=body, headers={"Authorization": f"Bearer {r.api_key}"},
                          timeout=30) as resp:
            events = [orjson.loads(line[6:]) for line in resp.iter_lines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
        (call,) = gw.store.get_calls(r.id)
        out = call.response
        if api == "chat":
            thought = "".join((e["choices"][0]["delta"].get("reasoning_content") or "") for e in events if e["choices"])
            assert thought == "The user greets me." == out["choices"][0]["message"]["reasoning_content"]
            assert out["choices"][0]["message"]["content"] == "Hello there, friend!"
        elif api == "anthropic":
            assert [b["type"] for b in out["content"]] == ["thinking", "text"]
            assert out["content"][0]["thinking"] == "The user greets me." and out["content"][1]["text"] == "Hello there, friend!"
            assert any(e.get("delta", {}).get("type") == "thinking_delta" for e in events)
        else:
            assert [o["type"] for o in out["output"]] == ["reasoning", "message"]
            assert out["output"][0]["content"][0]["text"] == "The user greets me."
            assert any(e["type"] == "response.reasoning_text.delta" for e in events)
        assert call.completion_token_ids[:-1] == ids  # the sampled tokens, thinking included
    finally:
        srv.stop()
