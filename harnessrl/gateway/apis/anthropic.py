"""The Anthropic Messages API as a translation to and from the internal chat request.

Harnesses built on the ``anthropic`` client (Claude Code among them) point ``ANTHROPIC_BASE_URL`` at
``<gateway>/r/<rollout>``. ``to_chat`` turns a Messages body into a chat body: system blocks and
mid-conversation system messages, text / tool_use / tool_result blocks, tools and tool_choice. Fields the
policy cannot honour (``thinking``, ``context_management``, ``output_config``, ``cache_control``, ...)
are accepted and listed in the translation's notes; hosted tools (web search, code execution, ...) are
left out and noted; images and documents are refused, since the policy reads text only -- unless
``[gateway] images = "pass"`` says it reads images: then a user turn's images become chat image parts.
``MessageEncoder`` turns the engine's chat deltas into the Messages event stream as they arrive, and
builds the complete message for the record (and for a non-streamed answer) from the same deltas.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from harnessrl.gateway.apis.base import (
    MEDIA_TYPES,
    Translation,
    data_url,
    expect_dict,
    expect_list,
    expect_str,
    json_schema,
    optional_int,
    optional_number,
    parts_content,
    unsupported_media,
)
from harnessrl.gateway.apis.base import (
    kind as _kind,
)
from harnessrl.gateway.errors import BadRequest

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
#: Request fields translated into the chat request.
_USED = frozenset({"model", "messages", "system", "max_tokens", "temperature", "top_p", "top_k",
                   "stop_sequences", "tools", "tool_choice", "stream"})
#: Block fields with no meaning for the policy (accepted silently: prompt caching, citations).
_BLOCK_META = ("cache_control", "citations")


def _text_blocks(content: Any, where: str, t: Translation) -> str:
    """The text of a string or a list of text blocks (other block kinds: media refused, rest noted)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for j, block in enumerate(expect_list(content, f"{where}.content")):
        block = expect_dict(block, f"{where}.content[{j}]")
        kind = _kind(block)
        if kind == "text":
            parts.append(expect_str(block.get("text", ""), f"{where}.content[{j}].text"))
        elif kind in MEDIA_TYPES:
            raise unsupported_media(str(kind), f"{where}.content[{j}]", t.images)
        else:
            t.note("ignored_blocks", str(kind))
    return "".join(parts)


def _image(block: dict[str, Any], where: str, t: Translation) -> dict[str, Any]:
    """An image block of a user turn as a chat image part (base64 or URL source), or the refusal."""
    if not t.images:
        raise unsupported_media("image", where)
    source = expect_dict(block.get("source"), f"{where}.source")
    kind = _kind(source)
    if kind == "base64":
        return t.image(data_url(source.get("media_type"), source.get("data"), f"{where}.source"), "image", where)
    if kind == "url":
        return t.image(expect_str(source.get("url"), f"{where}.source.url"), "image", where)
    raise unsupported_media(f"image source {kind!r}", where, t.images)


def _system(value: Any, t: Translation) -> str:
    if isinstance(value, str):
        return value
    parts = []
    for j, block in enumerate(expect_list(value, "'system'")):
        block = expect_dict(block, f"system[{j}]")
        if _kind(block, "text") != "text":
            t.note("ignored_blocks", str(block.get("type")))
            continue
        parts.append(expect_str(block.get("text", ""), f"system[{j}].text"))
    return "\n\n".join(p for p in parts if p)


def _message(i: int, m: Any, t: Translation, out: list[dict[str, Any]]) -> None:
    where = f"messages[{i}]"
    m = expect_dict(m, where)
    role = m.get("role")
    if role == "system":  # a mid-conversation system message (Claude Code's beta): kept in place
        out.append({"role": "system", "content": _text_blocks(m.get("content"), where, t)})
        return
    if role not in ("user", "assistant"):
        raise BadRequest(f"{where} must have role 'user', 'assistant' or 'system', not {role!r}")
    content = m.get("content")
    if isinstance(content, str):
        out.append({"role": role, "content": content})
        return
    text: list[str | dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(expect_list(content, f"{where}.content")):
        block = expect_dict(block, f"{where}.content[{j}]")
        kind = _kind(block)
        here = f"{where}.content[{j}]"
        if kind == "text":
            text.append(expect_str(block.get("text", ""), f"{here}.text"))
        elif kind == "image" and role == "user":
            text.append(_image(block, here, t))
        elif kind == "tool_use" and role == "assistant":
            args = block.get("input", {})
            calls.append({"id": expect_str(block.get("id", ""), f"{here}.id"), "type": "function",
                          "function": {"name": expect_str(block.get("name", ""), f"{here}.name"),
                                       "arguments": orjson.dumps(args).decode()}})
        elif kind == "tool_result" and role == "user":
            if text:  # keep the order of text and results within one user turn
                out.append({"role": "user", "content": parts_content(text)})
                text = []
            result = _text_blocks(block.get("content"), here, t)
            if block.get("is_error") and not result:
                result = "error"
            out.append({"role": "tool", "tool_call_id": expect_str(block.get("tool_use_id", ""),
                                                                   f"{here}.tool_use_id"),
                        "content": result})
        elif kind in ("thinking", "redacted_thinking"):
            t.note("ignored_blocks", kind)  # earlier reasoning is not shown again (as with Claude)
        elif kind in MEDIA_TYPES:
            raise unsupported_media(str(kind), here, t.images)
        else:
            t.note("ignored_blocks", str(kind))
    if text or calls:
        msg: dict[str, Any] = {"role": role, "content": parts_content(text) if text else None}
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)


def _tools(tools: Any, t: Translation) -> list[dict[str, Any]]:
    out = []
    for k, tool in enumerate(expect_list(tools, "'tools'")):
        tool = expect_dict(tool, f"tools[{k}]")
        kind = _kind(tool)
        if kind not in (None, "custom"):  # server tools (web_search_2025..., code_execution_..., bash_...)
            t.note("dropped_tools", str(tool.get("name") or kind))
            continue
        name = expect_str(tool.get("name"), f"tools[{k}].name")
        desc = tool.get("description") or ""
        out.append({"type": "function", "function": {
            "name": name, "description": expect_str(desc, f"tools[{k}].description"),
            "parameters": json_schema(tool.get("input_schema"), f"tools[{k}].input_schema")}})
    return out


def to_chat(body: Any, beta: str | None = None, images: bool = False) -> Translation:
    """The chat request equivalent to a Messages body (400 only for what cannot be served honestly).
    ``images``: the policy reads images (a user turn's image blocks become chat image parts)."""
    body = expect_dict(body, "the request body")
    t = Translation(chat={}, images=images)
    max_tokens = optional_int(body, "max_tokens")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' is required and must be a non-empty list")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _system(body["system"], t)})
    for i, m in enumerate(msgs):
        _message(i, m, t, messages)
    chat: dict[str, Any] = {"model": model, "messages": messages}
    if messages and messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
        # a prefilled answer: the policy continues it (vLLM's flags; render mode sees the last role)
        chat.update(continue_final_message=True, add_generation_prompt=False)
    if max_tokens is not None:
        chat["max_tokens"] = max_tokens
    for key in ("temperature", "top_p"):
        if optional_number(body, key) is not None:
            chat[key] = body[key]
    if optional_int(body, "top_k", minimum=0) is not None:
        chat["top_k"] = body["top_k"]
    stops = body.get("stop_sequences")
    if stops:
        chat["stop"] = [expect_str(s, "stop_sequences[]") for s in expect_list(stops, "'stop_sequences'")]
    if body.get("tools"):
        tools = _tools(body["tools"], t)
        if tools:
            chat["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        choice = expect_dict(choice, "'tool_choice'")
        kind = _kind(choice)
        if kind == "tool":
            chat["tool_choice"] = {"type": "function",
                                   "function": {"name": expect_str(choice.get("name"), "tool_choice.name")}}
        elif kind in ("auto", "any", "none"):
            chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
        else:
            raise BadRequest("tool_choice.type must be 'auto', 'any', 'tool' or 'none'")
        if choice.get("disable_parallel_tool_use") is True and "tools" in chat:
            chat["parallel_tool_calls"] = False
        if "tools" not in chat:
            chat.pop("tool_choice", None)
    if "stream" in body:
        if not isinstance(body["stream"], bool):
            raise BadRequest("'stream' must be true or false")
    ignored = sorted(k for k in body if k not in _USED)
    if ignored:
        t.notes["ignored_fields"] = ignored
    if beta:
        t.notes["anthropic_beta"] = beta
    t.chat = chat
    return t


#: Anthropic's error types by HTTP status (its clients and Claude Code read ``error.type``).
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 410: "invalid_request_error", 413: "request_too_large",
                429: "rate_limit_error", 503: "overloaded_error"}


def error_body(status: int, message: str, code: str | None) -> dict[str, Any]:
    """An error in the Messages API's shape (``{"type": "error", "error": {"type", "message"}}``), with the
    gateway's own code kept beside it."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message, "code": code}}


def count_estimate(chat: dict[str, Any]) -> int:
    """A rough token count (4 bytes a token) for when no engine can count exactly."""
    return max(1, len(orjson.dumps([chat.get("messages"), chat.get("tools")])) // 4)


def _usage(n_in: int, n_out: int) -> dict[str, int]:
    return {"input_tokens": n_in, "output_tokens": n_out, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class MessageEncoder:
    """Chat deltas in, Messages events out; ``result()`` is the complete message they add up to."""

    def __init__(self, model: str) -> None:
        self.id = f"msg_{uuid.uuid4().hex[:24]}"
        self.model = model
        self.blocks: list[dict[str, Any]] = []
        self._open: str | None = None  # kind of the open (last) block: "text", "thinking", "tool_use"
        self._args: dict[int, list[str]] = {}  # block index -> argument fragments of a tool_use
        self._tools: dict[int, int] = {}  # chat tool-call index -> block index
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None

    def start(self, input_tokens: int) -> bytes:
        self.input_tokens = input_tokens
        msg = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
               "stop_reason": None, "stop_sequence": None,
               "usage": _usage(input_tokens, 0)}
        return _event("message_start", {"type": "message_start", "message": msg})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return _event("content_block_stop", {"type": "content_block_stop", "index": len(self.blocks) - 1})

    def _begin(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.blocks.append(block)
        self._open = kind
        start = dict(block)
        if kind == "text":
            start["text"] = ""
        elif kind == "thinking":
            start.update(thinking="", signature="")
        else:
            start["input"] = {}
        return out + _event("content_block_start", {"type": "content_block_start",
                                                    "index": len(self.blocks) - 1, "content_block": start})

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks) - 1,
                                              "delta": delta})

    def feed(self, delta: dict[str, Any]) -> bytes:
        """Events for one chat delta (``reasoning_content``, ``content``, ``tool_calls``)."""
        out = b""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self._open != "thinking":
                out += self._begin("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.blocks[-1]["thinking"] += reasoning
            out += self._delta({"type": "thinking_delta", "thinking": reasoning})
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self._open != "text":
                out += self._begin("text", {"type": "text", "text": ""})
            self.blocks[-1]["text"] += text
            out += self._delta({"type": "text_delta", "text": text})
        for k, tc in enumerate(delta.get("tool_calls") or ()):
            idx = tc.get("index", k)
            fn = tc.get("function") or {}
            if idx not in self._tools:
                block = {"type": "tool_use", "id": tc.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                         "name": fn.get("name") or "", "input": {}}
                out += self._begin("tool_use", block)
                self._tools[idx] = len(self.blocks) - 1
                self._args[len(self.blocks) - 1] = []
            b = self._tools[idx]
            if fn.get("arguments"):
                self._args[b].append(fn["arguments"])
                if b == len(self.blocks) - 1:
                    out += self._delta({"type": "input_json_delta", "partial_json": fn["arguments"]})
        return out

    def finish(self, finish_reason: str | None, stop_string: Any, input_tokens: int, output_tokens: int) -> bytes:
        """The closing events: last block stop, ``message_delta`` with the stop reason, ``message_stop``."""
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.stop_reason = _STOP.get(finish_reason or "stop", "end_turn")
        if self.stop_reason == "end_turn" and isinstance(stop_string, str):
            self.stop_reason, self.stop_sequence = "stop_sequence", stop_string
        for b, parts in self._args.items():
            raw = "".join(parts) or "{}"
            try:
                self.blocks[b]["input"] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self.blocks[b]["input"] = {"_raw_arguments": raw}
        return self._close() + _event("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": self.stop_reason, "stop_sequence": self.stop_sequence},
            "usage": {"output_tokens": output_tokens}}) + _event("message_stop", {"type": "message_stop"})

    def result(self) -> dict[str, Any]:
        """The complete message (what a non-streamed request gets; what the record keeps)."""
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": self.blocks, "stop_reason": self.stop_reason, "stop_sequence": self.stop_sequence,
                "usage": _usage(self.input_tokens, self.output_tokens)}

    def error_event(self, message: str, kind: str = "api_error") -> bytes:
        return _event("error", {"type": "error", "error": {"type": kind, "message": message}})
