"""Requests shaped like the production coding CLIs send them are served, not refused.

Claude Code (Messages, streamed, system blocks, a mid-conversation system message, thinking config,
fields the policy cannot honour, max_tokens far over the cap), Codex (Responses, streamed, tool groups,
hosted and free-form tools, previous_response_id) and OpenCode (chat, max_tokens 32000). What was adapted
is recorded with the call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anthropic
import httpx
import openai
import orjson
import pytest
from fakes.fake_engine import EngineServer, FakeEngine, render_chat

from harnessrl.gateway.config import GatewayLimits
from harnessrl.types import ApiKind, CallStatus


def _tools(n: int) -> list[dict]:
    return [{"name": f"Tool{i}", "description": f"tool {i}", "input_schema": {
        "type": "object", "properties": {"n": {"type": "integer"}}}} for i in range(n)]


def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], orjson.loads(lines["data"])))
    return out


CLAUDE_CODE = {
    "model": "claude-sonnet-4-5", "max_tokens": 64000, "stream": True,
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Be concise."}, {"type": "text", "text": "Env: linux"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "x"},
                                          {"type": "text", "text": "Hi."}]},
        {"role": "system", "content": "The user switched to plan mode."},
        {"role": "user", "content": "Again"}],
    "tools": _tools(24) + [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
    "thinking": {"type": "adaptive"}, "context_management": {"edits": []}, "output_config": {"effort": "high"},
    "metadata": {"user_id": "u"}, "temperature": 1,
}


def test_claude_code_request_is_served_streamed_and_recorded(gw):
    r = gw.rollout()
    resp = httpx.post(f"{r.base_url.removesuffix('/v1')}/v1/messages?beta=true", json=CLAUDE_CODE, timeout=30,
                      headers={"x-api-key": r.api_key, "anthropic-beta": "claude-code-20250219,interleaved-thinking",
                               "anthropic-version": "2023-06-01"})
    assert resp.status_code == 200, resp.text
    events = _events(resp.text)
    names = [e for e, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "content_block_start" in names and "content_block_delta" in names
    sent = gw.engine.requests[-1]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "system", "user"]
    assert sent["messages"][0]["content"] == "You are Claude Code.\n\nBe concise.\n\nEnv: linux"
    assert len(sent["tools"]) == 24 and sent["max_tokens"] == 64000  # web_search left out; served as asked
    (call,) = gw.store.get_calls(r.id)
    assert call.status == CallStatus.OK and call.api == ApiKind.ANTHROPIC_MESSAGES
    assert call.request == CLAUDE_CODE  # the harness's own request is what the record keeps
    assert call.sampling["max_tokens"] == 64000 and "max_tokens_requested" not in call.sampling
    adjusted = call.sampling["adjusted"]
    assert adjusted["dropped_tools"] == ["web_search"]
    assert {"thinking", "context_management", "output_config", "metadata"} <= set(adjusted["ignored_fields"])
    assert adjusted["anthropic_beta"].startswith("claude-code")
    assert call.response["content"][0]["type"] == "tool_use"  # the fake engine calls the first tool
    assert call.response["content"][0]["name"] == "Tool0"


def test_count_tokens_and_media_refusal(gw):
    r = gw.rollout()
    c = anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0)
    counted = c.messages.count_tokens(model="claude", system="Be terse.", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens > 0
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
    try:
        c.messages.create(model="claude", max_tokens=10, messages=[{"role": "user", "content": [image]}])
    except anthropic.BadRequestError as exc:
        assert "text only" in str(exc) and "image" in str(exc)
    else:
        raise AssertionError("an image was accepted by a text-only policy")
    (refused,) = gw.store.get_calls(r.id)
    assert refused.status == CallStatus.REFUSED and (refused.error or "").startswith("400 unsupported_content")


CODEX_TOOLS = [
    {"type": "namespace", "name": "mcp__fs__", "description": "files", "tools": [
        {"type": "function", "name": "read", "description": "read a file", "strict": False,
         "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}]},
    {"type": "web_search", "external_web_access": False},
    {"type": "function", "name": "shell", "description": "run", "strict": False,
     "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}},
]


def test_codex_request_tool_groups_and_previous_response_id(gw):
    r = gw.rollout()
    body = {"model": "gpt-5-codex", "instructions": "You are Codex.", "stream": True, "store": False,
            "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}],
            "tools": CODEX_TOOLS, "tool_choice": "auto", "parallel_tool_calls": True,
            "reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "abc", "text": {"verbosity": "low"}}
    resp = httpx.post(f"{r.base_url}/responses", json=body, headers={"Authorization": f"Bearer {r.api_key}"},
                      timeout=30)
    assert resp.status_code == 200, resp.text
    events = _events(resp.text)
    kinds = [e["type"] for _, e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    done = [e["item"] for _, e in events if e["type"] == "response.output_item.done"]
    assert done[0]["type"] == "function_call" and done[0]["name"] == "read" and done[0]["namespace"] == "mcp__fs__"
    sent = gw.engine.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["mcp__fs__read", "shell"]
    assert sent["parallel_tool_calls"] is True
    final = events[-1][1]["response"]
    (call,) = gw.store.get_calls(r.id)
    assert call.response["id"] == final["id"] and call.response["output"] == final["output"]
    assert call.sampling["adjusted"]["dropped_tools"] == ["web_search"]
    assert {"include", "reasoning", "store", "text.verbosity"} <= set(call.sampling["adjusted"]["ignored_fields"])

    # a stateful client sends only the new items and previous_response_id
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    out = {"type": "function_call_output", "call_id": done[0]["call_id"], "output": "file contents"}
    second = c.responses.create(model="gpt-5-codex", previous_response_id=final["id"], input=[out],
                                tools=CODEX_TOOLS)
    assert second.status == "completed" and second.output_text
    msgs = gw.engine.requests[-1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]  # instructions not carried over
    assert msgs[2]["tool_calls"][0]["function"]["name"] == "mcp__fs__read"
    try:
        c.responses.create(model="m", previous_response_id="resp_unknown", input="x")
    except openai.BadRequestError as exc:
        assert "previous_response_id" in str(exc)
    else:
        raise AssertionError("an unknown previous_response_id was accepted")


def test_custom_tool_call_maps_back(gw):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    tools = [{"type": "custom", "name": "apply_patch", "description": "patch files",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]
    resp = c.responses.create(model="m", input="edit", tools=tools)
    item = resp.output[0]
    assert item.type == "custom_tool_call" and item.name == "apply_patch" and isinstance(item.input, str)
    sent = gw.engine.requests[-1]["tools"][0]["function"]
    assert sent["parameters"]["required"] == ["input"] and "start: /.+/" in sent["description"]


def test_opencode_max_tokens_is_served_as_asked_or_clamped_to_a_configured_cap(gw, make_gateway, caplog):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    out = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=32000,
                                    stream=True, stream_options={"include_usage": True})
    assert [ch for ch in out]
    (call,) = gw.store.get_calls(r.id)  # no cap by default: what it asked for
    assert call.sampling["max_tokens"] == 32000 and "max_tokens_requested" not in call.sampling
    with caplog.at_level(logging.INFO, logger="harnessrl.gateway"):
        capped = make_gateway(limits=GatewayLimits(max_tokens_per_call=4096))
    assert "max_tokens_per_call = 4096" in caplog.text  # a configured cap is said at start
    r2 = capped.rollout()
    c2 = openai.OpenAI(base_url=r2.base_url, api_key=r2.api_key, max_retries=0)
    c2.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=32000)
    c2.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    asked, unasked = capped.store.get_calls(r2.id)
    assert asked.sampling["max_tokens"] == 4096 and asked.sampling["max_tokens_requested"] == 32000
    assert asked.sampling["max_tokens_clamp"] == "cap"
    assert unasked.sampling["max_tokens"] == 4096 and "max_tokens_requested" not in unasked.sampling


def test_a_call_stopped_at_a_cap_says_so_in_show(make_gateway, tmp_path, capsys, monkeypatch):
    from harnessrl.cli import main

    monkeypatch.setenv("COLUMNS", "300")  # one line per row: the note is read whole
    gw = make_gateway(limits=GatewayLimits(max_tokens_per_call=2))
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    out = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=500)
    assert out.choices[0].finish_reason == "length"
    assert main(["show", r.id, "--db", f"sqlite:///{tmp_path / 'gw.db'}"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the table may wrap the note
    assert "max_tokens: asked 500, served 2 (the gateway's" in printed and "stopped there" in printed


class WindowedEngine(FakeEngine):
    """The fake engine with a context window, refusing like vLLM: 400 naming window and prompt length."""

    window = 64

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await super().__call__(scope, receive, send)
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        req = orjson.loads(body)
        plen = len(render_chat(req.get("messages") or []))
        if plen + (req.get("max_tokens") or 0) > self.window:
            err = orjson.dumps({"error": {"message": (
                f"This model's maximum context length is {self.window} tokens. However, you requested "
                f"{plen + req.get('max_tokens', 0)} tokens ({plen} in the messages, {req.get('max_tokens')} in "
                "the completion). Please reduce the length of the messages or completion."),
                "type": "BadRequestError", "code": 400}})
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": err})

        async def replay() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        return await super().__call__(scope, replay, send)


@pytest.fixture
def windowed() -> Iterator[EngineServer]:
    srv = EngineServer(WindowedEngine()).start()
    yield srv
    srv.stop()


def test_context_window_clamps_max_tokens_or_names_both_numbers(make_gateway, windowed):
    gw = make_gateway(engines=[windowed])
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "hello"}]  # 8 prompt tokens with the fake template
    out = c.chat.completions.create(model="m", messages=msgs, max_tokens=1000)
    assert out.choices[0].finish_reason == "stop"
    (call,) = gw.store.get_calls(r.id)
    assert call.sampling["max_tokens"] == 64 - 8 and call.sampling["max_tokens_requested"] == 1000
    with pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 100}], max_tokens=10)
    assert "103 tokens" in str(info.value) and "context is 64 tokens" in str(info.value)
    assert gw.store.get_calls(r.id)[-1].status == CallStatus.ERROR


def test_a_call_asking_no_max_tokens_gets_the_room_its_context_leaves(make_gateway, windowed):
    """The engine lists its window (vLLM's max_model_len): no max_tokens is sent, the engine gives the room
    left; with a rollout budget below the window, the budget is sent (and said)."""
    from harnessrl.gateway.config import GatewayLimits

    gw = make_gateway(engines=[windowed])
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    assert "max_tokens" not in windowed.engine.requests[-1]
    (call,) = gw.store.get_calls(r.id)
    assert "max_tokens" not in call.sampling and call.status == CallStatus.OK
    small = make_gateway(engines=[windowed], limits=GatewayLimits(max_tokens_per_rollout=20))
    r2 = small.rollout()
    c2 = openai.OpenAI(base_url=r2.base_url, api_key=r2.api_key, max_retries=0)
    c2.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    assert windowed.engine.requests[-1]["max_tokens"] == 20


def test_messages_errors_have_anthropics_shape(gw):
    r = gw.rollout()
    url = f"{r.base_url.removesuffix('/v1')}/v1/messages"
    bad = httpx.post(url, json={"model": "c", "messages": []}, headers={"x-api-key": r.api_key})
    assert bad.status_code == 400
    body = bad.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "messages" in body["error"]["message"]
    nokey = httpx.post(url, json={"model": "c", "messages": [{"role": "user", "content": "x"}]})
    assert nokey.status_code == 401 and nokey.json()["error"]["type"] == "authentication_error"


def test_responses_structured_output_is_served_as_response_format(gw):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    out = c.responses.create(model="m", input="ok?", text={"format": {"type": "json_schema", "name": "verdict",
                                                                       "schema": schema, "strict": True}})
    assert out.status == "completed" and out.text.format.type == "json_schema"
    sent = gw.engine.requests[-1]["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


def test_anthropic_prefill_continues_the_answer(gw):
    r = gw.rollout()
    c = anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0)
    c.messages.create(model="claude", max_tokens=16, messages=[{"role": "user", "content": "JSON please"},
                                                               {"role": "assistant", "content": "{"}])
    sent = gw.engine.requests[-1]
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert sent["messages"][-1] == {"role": "assistant", "content": "{"}
