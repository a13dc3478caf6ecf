"""The Anthropic Messages API on top of the engine's chat dialect (``POST /r/{rollout}/v1/messages``).

Harnesses built on the ``anthropic`` client point ``ANTHROPIC_BASE_URL`` at ``<gateway>/r/<rollout>``
(no ``/v1``: the client appends ``/v1/messages``). The request is translated to an OpenAI chat request
(system, text, tool_use and tool_result blocks, tools, tool_choice), served and recorded like any chat
call -- the record keeps the Anthropic request and response -- and the answer is translated back.
A streamed request gets the Anthropic event sequence, produced after the call is recorded.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from harnessrl.gateway.errors import BadRequest

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise BadRequest(f"{where}: content must be a string or a list of blocks")
    parts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise BadRequest(f"{where}: content block type {kind!r} is not supported here (text only)")
        parts.append(str(block.get("text", "")))
    return "".join(parts)


def to_chat(body: Any) -> dict[str, Any]:
    """An OpenAI chat-completions body equivalent to an Anthropic Messages body (400 when malformed)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if type(body.get("max_tokens")) is not int or body["max_tokens"] < 1:
        raise BadRequest("'max_tokens' is required (a positive integer) by the Messages API")
    msgs_in = body.get("messages")
    if not isinstance(msgs_in, list) or not msgs_in:
        raise BadRequest("'messages' is required and must be a non-empty list")
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _text(body["system"], "system")})
    for i, m in enumerate(msgs_in):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise BadRequest(f"messages[{i}] must have role 'user' or 'assistant'")
        content = m.get("content")
        if isinstance(content, str):
            messages.append({"role": m["role"], "content": content})
            continue
        if not isinstance(content, list):
            raise BadRequest(f"messages[{i}].content must be a string or a list of blocks")
        text, calls = [], []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                text.append(str(block.get("text", "")))
            elif kind == "tool_use" and m["role"] == "assistant":
                calls.append({"id": block.get("id"), "type": "function", "function": {
                    "name": block.get("name"), "arguments": orjson.dumps(block.get("input", {})).decode()}})
            elif kind == "tool_result" and m["role"] == "user":
                messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                 "content": _text(block.get("content"), f"messages[{i}] tool_result")})
            elif kind in ("thinking", "redacted_thinking"):
                continue  # not shown to the policy again, as with Anthropic's own models
            else:
                raise BadRequest(f"messages[{i}]: content block type {kind!r} is not supported")
        if text or calls:
            out: dict[str, Any] = {"role": m["role"], "content": "".join(text) if text else None}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages, "max_tokens": body["max_tokens"]}
    for key in ("temperature", "top_p", "top_k"):
        if key in body:
            chat[key] = body[key]
    if body.get("stop_sequences"):
        chat["stop"] = body["stop_sequences"]
    if body.get("tools"):
        chat["tools"] = [{"type": "function", "function": {
            "name": t.get("name"), "description": t.get("description", ""),
            "parameters": t.get("input_schema") or {"type": "object"}}} for t in body["tools"]]
    choice = body.get("tool_choice") or {}
    if isinstance(choice, dict) and choice.get("type"):
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(
            choice["type"], {"type": "function", "function": {"name": choice.get("name")}})
    return chat


def from_chat(resp: dict[str, Any], model: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Anthropic message for an engine chat response (call before engine-only fields are stripped)."""
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") or {}
        try:
            args = orjson.loads(fn.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            args = {"_raw_arguments": fn.get("arguments")}
        content.append({"type": "tool_use", "id": tc.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                        "name": fn.get("name"), "input": args})
    stop_reason, stop_sequence = _STOP.get(choice.get("finish_reason") or "stop", "end_turn"), None
    if stop_reason == "end_turn" and isinstance(choice.get("stop_reason"), str):
        stop_reason, stop_sequence = "stop_sequence", choice["stop_reason"]
    usage = resp.get("usage") or {}
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                      "output_tokens": usage.get("completion_tokens", 0)}}


def as_events(message: dict[str, Any]) -> bytes:
    """The Messages streaming event sequence for a complete message."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            **message, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 0}}})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
        events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                   ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": i})]
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": message["stop_reason"],
                                            "stop_sequence": message["stop_sequence"]},
                                  "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in events)
