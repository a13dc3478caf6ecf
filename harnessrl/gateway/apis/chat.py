"""The OpenAI chat API: the engine's own dialect, so validation and relaying only.

``validate`` refuses malformed bodies with a 400 naming the field, so that nothing malformed reaches the
engine (an engine error then always means an engine problem). ``Passthrough`` relays the engine's chunks
(chat or completions) as they arrive, engine-only fields stripped, holding the closing ones (finish, usage, ``[DONE]``) until
the call is recorded. ``ChatEncoder`` builds chat chunks from deltas, for gateway render mode where the
gateway itself turns sampled tokens into a message.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from harnessrl.gateway.apis.base import DONE, MEDIA_TYPES, expect_dict, unsupported_media, validate_common
from harnessrl.gateway.errors import BadRequest, GatewayError


def _content_ok(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("type", "text"), str)
        and isinstance(p.get("text", ""), str) for p in content)


def _validate_message(i: int, m: Any, images: bool) -> None:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
    if not _content_ok(m.get("content")):
        raise BadRequest(f"messages[{i}].content must be a string, null or a list of text parts")
    for j, part in enumerate(m["content"] if isinstance(m.get("content"), list) else ()):
        kind = part.get("type", "text")
        if kind in MEDIA_TYPES and not (kind == "image_url" and images and m["role"] == "user"):
            raise unsupported_media(kind, f"messages[{i}].content[{j}]", images)
    for key in ("name", "tool_call_id", "reasoning_content"):
        if m.get(key) is not None and not isinstance(m[key], str):
            raise BadRequest(f"messages[{i}].{key} must be a string")
    calls = m.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise BadRequest(f"messages[{i}].tool_calls must be a list")
    for k, tc in enumerate(calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("arguments", ""), str) or not isinstance(tc.get("id", ""), str):
            raise BadRequest(f"messages[{i}].tool_calls[{k}] must have a string id and a function with "
                             "string name and arguments")


def _validate_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    for k, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("parameters") or {}, dict) \
                or not isinstance(fn.get("description") or "", str):
            raise BadRequest(f"tools[{k}] must be {{'type': 'function', 'function': {{'name': str, "
                             "'parameters': object}}")


def validate(body: Any, images: bool = False) -> None:
    """Refuse a malformed chat body with a 400 that says which field is wrong (nothing malformed reaches
    the engine, so that an engine error always means an engine problem). Media parts are refused as on every
    API, save a user message's ``image_url`` parts when ``images`` (the policy reads images)."""
    body = expect_dict(body, "the request body")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' is required and must be a non-empty list")
    for i, m in enumerate(msgs):
        _validate_message(i, m, images)
    if "logprobs" in body and not isinstance(body["logprobs"], bool | None):
        raise BadRequest("'logprobs' must be true or false")
    if body.get("tool_choice") is not None and not isinstance(body["tool_choice"], str | dict):
        raise BadRequest("'tool_choice' must be a string or an object")
    if "tools" in body and body["tools"] is not None:
        _validate_tools(body["tools"])
    validate_common(body)


DONE_EVENT = b"data: " + DONE + b"\n\n"
#: Fields the engine adds that a standard client does not expect.
_TOP_EXTRAS = ("prompt_token_ids", "prompt_logprobs", "kv_transfer_params", "policy_version")
_CHOICE_TOKEN_EXTRAS = ("token_ids", "prompt_token_ids")
_CHOICE_EXTRAS = ("stop_reason", "prompt_logprobs", "token_versions")


def strip(resp: dict, want_logprobs: bool, want_token_ids: bool) -> dict:
    """Remove engine-only fields in place so a standard client sees a standard object."""
    if not want_token_ids:
        for k in _TOP_EXTRAS:
            resp.pop(k, None)
    else:
        resp.pop("policy_version", None)
    for ch in resp.get("choices") or ():
        if not want_token_ids:
            for k in _CHOICE_TOKEN_EXTRAS:
                ch.pop(k, None)
        for k in _CHOICE_EXTRAS:
            ch.pop(k, None)
        if not want_logprobs and "logprobs" in ch:
            ch["logprobs"] = None
    return resp


def sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class Passthrough:
    """The engine's chat or completions chunks, relayed as they arrive."""

    def __init__(self, model: str, want_logprobs: bool, want_token_ids: bool) -> None:
        self.model, self.want_logprobs, self.want_token_ids = model, want_logprobs, want_token_ids
        self._held: list[bytes] = []

    def chunk(self, raw: dict[str, Any]) -> bytes:
        """The bytes to send now for one engine chunk; closing chunks (and all after them) are held."""
        raw["model"] = self.model
        out = sse(strip(raw, self.want_logprobs, self.want_token_ids))
        choices = raw.get("choices") or ()
        if self._held or any(c.get("finish_reason") for c in choices) or (not choices and raw.get("usage")):
            self._held.append(out)
            return b""
        return out

    def tail(self) -> bytes:
        """What was held back, and ``[DONE]``: sent once the call is recorded."""
        return b"".join(self._held) + DONE_EVENT

    @staticmethod
    def error_event(err: GatewayError) -> bytes:
        return sse(err.body()) + DONE_EVENT


class ChatEncoder:
    """Chat deltas in, ``chat.completion.chunk`` events out (one choice); ``result()`` the whole answer."""

    def __init__(self, model: str, include_usage: bool = False) -> None:
        self.base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
                     "created": int(time.time()), "model": model}
        self.include_usage = include_usage
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**self.base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                              "finish_reason": finish}]})

    def start(self, input_tokens: int) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def feed(self, delta: dict[str, Any]) -> bytes:
        out = b""
        if isinstance(delta.get("reasoning_content"), str) and delta["reasoning_content"]:
            self.reasoning.append(delta["reasoning_content"])
            out += self._chunk({"reasoning_content": delta["reasoning_content"]})
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content.append(delta["content"])
            out += self._chunk({"content": delta["content"]})
        for tc in delta.get("tool_calls") or ():
            fn = tc.get("function") or {}
            call = {"id": tc.get("id"), "type": "function",
                    "function": {"name": fn.get("name") or "", "arguments": fn.get("arguments") or ""}}
            out += self._chunk({"tool_calls": [{"index": len(self.calls), **call}]})
            self.calls.append(call)
        return out

    def finish(self, finish_reason: str | None, stop_string: Any, input_tokens: int, output_tokens: int) -> bytes:
        self.finish_reason = finish_reason
        self.usage = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens}
        out = self._chunk({}, finish_reason)
        if self.include_usage:
            out += sse({**self.base, "choices": [], "usage": self.usage})
        return out + DONE_EVENT

    def result(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) if self.content else None}
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            msg["tool_calls"] = self.calls
        return {**self.base, "object": "chat.completion", "usage": self.usage,
                "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": self.finish_reason}]}

    def error_event(self, message: str, kind: str = "upstream_error") -> bytes:
        return sse({"error": {"message": message, "type": kind, "code": None}}) + DONE_EVENT


def synth_stream(resp: dict[str, Any], body: dict[str, Any]) -> bytes:
    """A complete chat answer as a chunk stream (one delta per choice): several choices in render mode."""
    base = {"id": resp["id"], "object": "chat.completion.chunk", "created": resp["created"], "model": resp["model"]}
    parts = []
    for ch in resp["choices"]:
        delta = dict(ch["message"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{"index": k, **tc} for k, tc in enumerate(delta["tool_calls"])]
        parts.append({**base, "choices": [{"index": ch["index"], "delta": delta, "finish_reason": None}]})
        parts.append({**base, "choices": [{"index": ch["index"], "delta": {}, "finish_reason": ch["finish_reason"]}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        parts.append({**base, "choices": [], "usage": resp["usage"]})
    return b"".join(sse(p) for p in parts) + DONE_EVENT
