"""The OpenAI Responses API on top of the engine's chat dialect (``POST /r/{rollout}/v1/responses``).

``openai-agents`` and newer harnesses call ``responses.create`` by default. The request's input items
(messages, function_call, function_call_output) become chat messages; the chat answer becomes output
items (message with output_text, function_call). Stateless: ``previous_response_id`` is refused (send the
full input), which is also what keeps every prompt's tokens in the record. A streamed request gets the
Responses event sequence, produced after the call is recorded.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from harnessrl.gateway.errors import BadRequest


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise BadRequest(f"{where}: content must be a string or a list of parts")
    out = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text"):
            raise BadRequest(f"{where}: content part type {kind!r} is not supported (text only)")
        out.append(str(part.get("text", "")))
    return "".join(out)


def to_chat(body: Any) -> dict[str, Any]:
    """An OpenAI chat-completions body equivalent to a Responses body (400 when malformed)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("previous_response_id"):
        raise BadRequest("previous_response_id is not supported by this gateway: send the full input "
                         "(set store=false in the client)", code="unsupported_parameter")
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise BadRequest("'input' is required: a string or a non-empty list of items")
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{i}] must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise BadRequest(f"input[{i}]: role must be user, assistant, system or developer")
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _text(item.get("content"), f"input[{i}]")})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)  # text and calls of one turn stay one message
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output if isinstance(output, str) else _text(output, f"input[{i}]")})
        elif kind == "reasoning":
            continue
        else:
            raise BadRequest(f"input[{i}]: item type {kind!r} is not supported")
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            chat[key] = body[key]
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    unsupported = sorted({t.get("type") for t in tools} - {"function"})
    if unsupported:
        raise BadRequest(f"tool types {unsupported} are not supported (function tools only)")
    if tools:
        chat["tools"] = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description")
                                                           or "", "parameters": t.get("parameters") or {}}}
                         for t in tools]
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        chat["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    return chat


def from_chat(resp: dict[str, Any], model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The Responses object for an engine chat response."""
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if msg.get("content"):
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "output_text", "text": msg["content"], "annotations": []}]})
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") or {}
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}",
                       "call_id": tc.get("id") or f"call_{uuid.uuid4().hex[:24]}", "name": fn.get("name"),
                       "arguments": fn.get("arguments") or "", "status": "completed"})
    length = choice.get("finish_reason") == "length"
    usage = resp.get("usage") or {}
    n_in, n_out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
            "status": "incomplete" if length else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if length else None,
            "error": None, "model": model, "output": output, "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": None,
            "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def as_events(resp: dict[str, Any]) -> bytes:
    """The Responses streaming event sequence for a complete response object."""
    events: list[dict[str, Any]] = []
    start = {**resp, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    events += [{"type": "response.created", "response": start},
               {"type": "response.in_progress", "response": start}]
    for i, item in enumerate(resp["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            ids = {"item_id": item["id"], "output_index": i, "content_index": 0}
            events += [
                {"type": "response.output_item.added", "output_index": i,
                 "item": {**item, "status": "in_progress", "content": []}},
                {"type": "response.content_part.added", **ids, "part": part},
                {"type": "response.output_text.delta", **ids, "delta": text, "logprobs": []},
                {"type": "response.output_text.done", **ids, "text": text, "logprobs": []},
                {"type": "response.content_part.done", **ids, "part": item["content"][0]},
                {"type": "response.output_item.done", "output_index": i, "item": item}]
        else:
            events += [
                {"type": "response.output_item.added", "output_index": i,
                 "item": {**item, "arguments": "", "status": "in_progress"}},
                {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": i,
                 "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": i,
                 "arguments": item["arguments"]},
                {"type": "response.output_item.done", "output_index": i, "item": item}]
    done = "response.incomplete" if resp["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": resp})
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps({**e, "sequence_number": n})
                    + b"\n\n" for n, e in enumerate(events))
