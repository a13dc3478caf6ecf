"""The OpenAI Responses API as a translation to and from the internal chat request.

``openai-agents`` and Codex call ``/v1/responses``. ``to_chat`` turns input items (messages, function and
custom tool calls and their outputs, reasoning) into chat messages, and the tools (top-level ``tools`` and
Codex's ``additional_tools`` items) into chat function tools (``responses_tools``: tool groups flattened
into ``<group>__<tool>`` and their calls mapped back to the group and name the harness declared; free-form
``custom`` tools become functions of one string argument ``input``; top-level hosted tools the policy
cannot run are left out and noted). ``previous_response_id`` continues a conversation the gateway kept (the caller passes its
messages in): the last few of a live rollout in memory, older ones read back from its recorded calls. ``ResponseEncoder`` turns chat deltas into the Responses event stream as they
arrive and builds the complete response object from the same deltas.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from harnessrl.gateway.apis.base import (
    MEDIA_TYPES,
    ToolName,
    Translation,
    expect_dict,
    expect_list,
    expect_str,
    flat_name,
    optional_int,
    optional_number,
    parts_content,
    unsupported_media,
)
from harnessrl.gateway.apis.base import (
    kind as _kind,
)
from harnessrl.gateway.apis.responses_tools import chat_tools, merge
from harnessrl.gateway.errors import BadRequest, LimitExceeded
from harnessrl.types import ApiKind, Call, CallStatus

_USED = frozenset({"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools",
                   "tool_choice", "parallel_tool_calls", "stream", "previous_response_id", "text"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"})


def _text(content: Any, where: str, t: Translation) -> str:
    out = _parts(content, where, t, user=False)
    return "".join(p for p in out if isinstance(p, str))


def _parts(content: Any, where: str, t: Translation, user: bool) -> list[str | dict[str, Any]]:
    """A message's text parts, and (a user message, a policy that reads images) its images as chat parts."""
    if content is None or isinstance(content, str):
        return [content or ""]
    out: list[str | dict[str, Any]] = []
    for j, part in enumerate(expect_list(content, f"{where}.content")):
        here = f"{where}.content[{j}]"
        part = expect_dict(part, here)
        kind = _kind(part)
        if kind in _TEXT_PARTS:
            out.append(expect_str(part.get("text", part.get("refusal", "")), f"{here}.text"))
        elif kind == "input_image" and user and t.images and isinstance(part.get("image_url"), str):
            out.append(t.image(part["image_url"], "input_image", here))
        elif kind in MEDIA_TYPES:
            raise unsupported_media(str(kind), here, t.images)
        else:
            t.note("ignored_parts", str(kind))
    return out


def _call_name(item: dict[str, Any], where: str) -> str:
    name = expect_str(item.get("name", ""), f"{where}.name")
    ns = item.get("namespace")
    return flat_name(expect_str(ns, f"{where}.namespace"), name) if ns else name


def _assistant_call(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and "tool_call_id" not in last:
        last.setdefault("tool_calls", []).append(call)  # text and calls of one turn stay one message
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _items(items: list[Any], t: Translation, tools: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The chat messages of the input items; the chat tools of its ``additional_tools`` items go to ``tools``."""
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        item = expect_dict(item, where)
        kind = _kind(item, "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise BadRequest(f"{where}: role must be user, assistant, system or developer, not {role!r}")
            content = parts_content(_parts(item.get("content"), where, t, user=role == "user"))
            messages.append({"role": "system" if role == "developer" else role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            if kind == "function_call":
                args = expect_str(item.get("arguments") or "", f"{where}.arguments")
            else:
                args = orjson.dumps({"input": expect_str(item.get("input") or "", f"{where}.input")}).decode()
            _assistant_call(messages, {"id": expect_str(item.get("call_id", ""), f"{where}.call_id"),
                                       "type": "function",
                                       "function": {"name": _call_name(item, where), "arguments": args}})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": expect_str(item.get("call_id", ""), f"{where}.call_id"),
                             "content": output if isinstance(output, str) else _text(output, where, t)})
        elif kind == "additional_tools":  # Codex's tools (responses_tools.py): offered as top-level ones
            tools.append(chat_tools(item.get("tools") or [], t, f"{where}.tools", strict=True))
            t.note("additional_tools", where)
        elif kind in MEDIA_TYPES:
            raise unsupported_media(str(kind), where, t.images)
        else:  # reasoning (not shown again), hosted-tool calls, item references, ...
            t.note("ignored_items", str(kind))
    return messages


def _response_format(text: Any, t: Translation) -> dict[str, Any] | None:
    """``text.format`` as the chat API's ``response_format`` (structured output is served, not ignored)."""
    if not isinstance(text, dict):
        return None
    for key in text:
        if key != "format":
            t.note("ignored_fields", f"text.{key}")
    fmt = text.get("format")
    if fmt is None:
        return None
    fmt = expect_dict(fmt, "text.format")
    kind = _kind(fmt)
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {"name": fmt.get("name") or "response", "schema": expect_dict(fmt.get("schema"), "text.format.schema")}
        if isinstance(fmt.get("strict"), bool):
            schema["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": schema}
    if kind != "text":
        raise BadRequest("text.format.type must be 'text', 'json_object' or 'json_schema'")
    return None


def to_chat(body: Any, previous: list[dict[str, Any]] | None = None, images: bool = False) -> Translation:
    """The chat request equivalent to a Responses body. ``previous``: the messages of the conversation
    ``previous_response_id`` names (the caller looks it up; the instructions are not carried over);
    ``images``: the policy reads images (a user message's ``input_image`` parts become chat image parts)."""
    body = expect_dict(body, "the request body")
    t = Translation(chat={}, images=images)
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or (not items and not previous):
        raise BadRequest("'input' is required: a string or a non-empty list of items")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions:
        messages.append({"role": "system", "content": expect_str(instructions, "'instructions'")})
    groups = [chat_tools(body["tools"], t, "tools", strict=False)] if body.get("tools") else []
    conversation = list(previous or ()) + _items(items, t, groups)
    t.notes["conversation_start"] = len(messages)
    chat: dict[str, Any] = {"model": model, "messages": messages + conversation}
    max_out = optional_int(body, "max_output_tokens")
    if max_out is not None:
        chat["max_tokens"] = max_out
    for key in ("temperature", "top_p"):
        if optional_number(body, key) is not None:
            chat[key] = body[key]
    tools = merge(groups)
    if tools:
        chat["tools"] = tools
    choice = body.get("tool_choice")
    if "tools" in chat and choice is not None:
        if isinstance(choice, str):
            if choice not in ("auto", "none", "required"):
                raise BadRequest("tool_choice must be 'auto', 'none', 'required' or an object")
            chat["tool_choice"] = choice
        elif isinstance(choice, dict) and _kind(choice) in ("function", "custom"):
            name = expect_str(choice.get("name"), "tool_choice.name")
            chat["tool_choice"] = {"type": "function", "function": {"name": name}}
        else:
            t.note("ignored_fields", "tool_choice")
    if "tools" in chat and isinstance(body.get("parallel_tool_calls"), bool):
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    if "stream" in body:
        if not isinstance(body["stream"], bool):
            raise BadRequest("'stream' must be true or false")
    fmt = _response_format(body.get("text"), t)
    if fmt is not None:
        chat["response_format"] = fmt
    ignored = sorted(k for k in body if k not in _USED)
    if ignored:
        t.notes["ignored_fields"] = sorted({*t.notes.get("ignored_fields", []), *ignored})
    t.chat = chat
    return t


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class ResponseEncoder:
    """Chat deltas in, Responses events out; ``result()`` is the object they add up to."""

    def __init__(self, model: str, body: dict[str, Any], names: dict[str, ToolName]) -> None:
        self.id = f"resp_{uuid.uuid4().hex}"
        self.model, self.body, self.names = model, body, names
        self.created = int(time.time())
        self.output: list[dict[str, Any]] = []
        self._open: str | None = None
        self._tools: dict[int, int] = {}  # chat tool-call index -> output index
        self._seq = 0
        self.status = "in_progress"
        self.usage: dict[str, Any] | None = None

    def _ev(self, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self._seq
        self._seq += 1
        return _event(data)

    def _obj(self) -> dict[str, Any]:
        b = self.body
        length = self.status == "incomplete"
        return {"id": self.id, "object": "response", "created_at": self.created, "status": self.status,
                "incomplete_details": {"reason": "max_output_tokens"} if length else None,
                "error": None, "model": self.model, "output": self.output,
                "instructions": b.get("instructions"), "max_output_tokens": b.get("max_output_tokens"),
                "metadata": b.get("metadata") if isinstance(b.get("metadata"), dict) else {},
                "parallel_tool_calls": b.get("parallel_tool_calls", True),
                "previous_response_id": b.get("previous_response_id"),
                "temperature": b.get("temperature"), "top_p": b.get("top_p"),
                "tool_choice": b.get("tool_choice", "auto"),
                "tools": b.get("tools") if isinstance(b.get("tools"), list) else [],
                "text": b["text"] if isinstance(b.get("text"), dict) and isinstance(b["text"].get("format"), dict)
                else {"format": {"type": "text"}}, "truncation": "disabled", "store": b.get("store", True),
                "usage": self.usage}

    def start(self, input_tokens: int) -> bytes:
        start = {**self._obj(), "output": []}
        return self._ev({"type": "response.created", "response": start}) + \
            self._ev({"type": "response.in_progress", "response": start})

    def _close(self) -> bytes:
        kind, self._open = self._open, None
        if kind is None:
            return b""
        i = len(self.output) - 1
        item = self.output[i]
        item["status"] = "completed"
        out = b""
        if kind == "message":
            part = item["content"][0]
            ids = {"item_id": item["id"], "output_index": i, "content_index": 0}
            out += self._ev({"type": "response.output_text.done", **ids, "text": part["text"], "logprobs": []})
            out += self._ev({"type": "response.content_part.done", **ids, "part": part})
        elif kind == "reasoning":
            part = item["content"][0]
            ids = {"item_id": item["id"], "output_index": i, "content_index": 0}
            out += self._ev({"type": "response.reasoning_text.done", **ids, "text": part["text"]})
        elif kind == "function_call":
            self._map_back(item)
            if item["type"] == "function_call":
                out += self._ev({"type": "response.function_call_arguments.done", "item_id": item["id"],
                                 "output_index": i, "arguments": item["arguments"]})
            else:  # a custom tool's call is announced once complete (its input is not JSON)
                out += self._ev({"type": "response.output_item.added", "output_index": i,
                                 "item": {**item, "input": "", "status": "in_progress"}})
        return out + self._ev({"type": "response.output_item.done", "output_index": i, "item": item})

    def _map_back(self, item: dict[str, Any]) -> None:
        """The harness's own name (and group) for a call of a flattened or custom tool."""
        tn = self.names.get(item["name"])
        if tn is None:
            return
        item["name"] = tn.name
        if tn.namespace:
            item["namespace"] = tn.namespace
        if tn.kind == "custom":
            try:
                value = orjson.loads(item["arguments"] or "{}")
                text = value.get("input") if isinstance(value, dict) else None
            except orjson.JSONDecodeError:
                text = None
            item["type"] = "custom_tool_call"
            item["input"] = text if isinstance(text, str) else item["arguments"]
            del item["arguments"]

    def _begin(self, kind: str, item: dict[str, Any]) -> bytes:
        out = self._close()
        self.output.append(item)
        self._open = kind
        i = len(self.output) - 1
        if kind == "message":
            out += self._ev({"type": "response.output_item.added", "output_index": i,
                             "item": {**item, "content": []}})
            out += self._ev({"type": "response.content_part.added", "item_id": item["id"], "output_index": i,
                             "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        elif kind == "reasoning":
            out += self._ev({"type": "response.output_item.added", "output_index": i,
                             "item": {**item, "content": []}})
        elif self.names.get(item["name"], ToolName("")).kind != "custom":
            shown = {**item}
            tn = self.names.get(item["name"])
            if tn is not None:
                shown["name"] = tn.name
                if tn.namespace:
                    shown["namespace"] = tn.namespace
            out += self._ev({"type": "response.output_item.added", "output_index": i, "item": shown})
        return out

    def feed(self, delta: dict[str, Any]) -> bytes:
        out = b""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self._open != "reasoning":
                out += self._begin("reasoning", {"type": "reasoning", "id": f"rs_{uuid.uuid4().hex}",
                                                 "summary": [], "status": "in_progress",
                                                 "content": [{"type": "reasoning_text", "text": ""}]})
            item = self.output[-1]
            item["content"][0]["text"] += reasoning
            out += self._ev({"type": "response.reasoning_text.delta", "item_id": item["id"],
                             "output_index": len(self.output) - 1, "content_index": 0, "delta": reasoning})
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self._open != "message":
                out += self._begin("message", {
                    "type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "in_progress",
                    "role": "assistant", "content": [{"type": "output_text", "text": "", "annotations": []}]})
            item = self.output[-1]
            item["content"][0]["text"] += text
            out += self._ev({"type": "response.output_text.delta", "item_id": item["id"],
                             "output_index": len(self.output) - 1, "content_index": 0, "delta": text,
                             "logprobs": []})
        for k, tc in enumerate(delta.get("tool_calls") or ()):
            idx = tc.get("index", k)
            fn = tc.get("function") or {}
            if idx not in self._tools:
                item = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex}",
                        "call_id": tc.get("id") or f"call_{uuid.uuid4().hex[:24]}", "name": fn.get("name") or "",
                        "arguments": "", "status": "in_progress"}
                out += self._begin("function_call", item)
                self._tools[idx] = len(self.output) - 1
            i = self._tools[idx]
            item = self.output[i]
            if fn.get("arguments"):
                item["arguments"] += fn["arguments"]
                if i == len(self.output) - 1 and self.names.get(item["name"], ToolName("")).kind != "custom":
                    out += self._ev({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                                     "output_index": i, "delta": fn["arguments"]})
        return out

    def finish(self, finish_reason: str | None, stop_string: Any, input_tokens: int, output_tokens: int) -> bytes:
        out = self._close()
        self.status = "incomplete" if finish_reason == "length" else "completed"
        self.usage = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}
        kind = "response.incomplete" if self.status == "incomplete" else "response.completed"
        return out + self._ev({"type": kind, "response": self._obj()})

    def result(self) -> dict[str, Any]:
        return self._obj()

    def error_event(self, message: str, code: str = "server_error") -> bytes:
        self.status = "failed"
        obj = {**self._obj(), "error": {"code": code, "message": message}}
        return self._ev({"type": "response.failed", "response": obj})


def conversation(chat: dict[str, Any], start: int, response: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages a later ``previous_response_id`` continues: this request's conversation (without
    its instructions) and the answer's output as an assistant message."""
    msgs = list(chat["messages"][start:])
    text = "".join(p.get("text", "") for o in response["output"] if o["type"] == "message" for p in o["content"])
    calls = []
    for o in response["output"]:
        if o["type"] in ("function_call", "custom_tool_call"):
            name = flat_name(o["namespace"], o["name"]) if o.get("namespace") else o["name"]
            args = o["arguments"] if o["type"] == "function_call" else orjson.dumps({"input": o["input"]}).decode()
            calls.append({"id": o["call_id"], "type": "function", "function": {"name": name, "arguments": args}})
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = calls
    return [*msgs, msg]


# -- conversations kept for previous_response_id ----------------------------------------------------------
#: Conversations kept in memory per live rollout (the latest answers: what a stateful client continues).
#: Older ones are read back from the store when named (``rebuild_conversation``), so what this bounds is
#: memory, not which responses a harness may continue.
KEEP_CONVERSATIONS = 4


def keep_conversation(kept: dict[str, bytes], response_id: str, conversation: list[dict[str, Any]]) -> None:
    """Keep ``conversation`` as JSON (its exact size, a third of the Python objects') among the last few."""
    kept.pop(response_id, None)
    kept[response_id] = orjson.dumps(conversation)
    while len(kept) > KEEP_CONVERSATIONS:
        kept.pop(next(iter(kept)))


def kept_conversation(kept: dict[str, bytes], response_id: str) -> list[dict[str, Any]] | None:
    raw = kept.get(response_id)
    return None if raw is None else orjson.loads(raw)


def recorded_bytes(calls: list[Call]) -> int:
    """The JSON size of what recorded calls hold as request and response: what a read-back costs."""
    return sum(len(orjson.dumps(c.request)) + (len(orjson.dumps(c.response)) if c.response else 0) for c in calls)


def recall_refused(response_id: str, used: int, budget: int) -> LimitExceeded:
    """The error once a rollout's read-backs of old responses have used up ``limits.max_recall_bytes``."""
    return LimitExceeded(
        f"previous_response_id {response_id!r} is no longer kept in memory, and this rollout has already read "
        f"{used} bytes of its recorded calls back to rebuild old responses (limits.max_recall_bytes = {budget}); "
        "send the full input instead of previous_response_id", code="recall_budget")


def rebuild_conversation(calls: list[Call], response_id: str) -> list[dict[str, Any]] | None:
    """The conversation ``response_id`` ends, rebuilt from a rollout's recorded calls (oldest first), or
    None when none of its answered Responses calls gave that id. Each call's own ``previous_response_id``
    is resolved from the ones before it."""
    built: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        resp = call.response
        if call.api != ApiKind.RESPONSES or call.status != CallStatus.OK or not isinstance(resp, dict):
            continue
        try:
            prev = call.request.get("previous_response_id")
            t = to_chat(call.request, built.get(prev) if isinstance(prev, str) else None)
            conv = conversation(t.chat, t.notes.get("conversation_start", 0), resp)
        except (BadRequest, KeyError, TypeError, ValueError):
            continue  # an answer we cannot read back
        built[resp["id"]] = conv
        if resp["id"] == response_id:
            return conv
    return None
