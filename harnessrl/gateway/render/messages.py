"""Normalizing OpenAI chat messages, and the message-level keys used to find reusable prefixes.

Two calls share a prefix when their messages are *the same conversation*, not when their texts tokenize
alike: harnesses re-serialize what they send back (``content`` as a string or as text parts, ``None`` vs
``""``, tool-call arguments re-dumped with other spacing or key order). Each message is therefore reduced to
a canonical key (role, text, tool calls by name and parsed arguments, tool_call_id) and hashed; a
conversation is a chain of rolling digests, so "is call A's conversation a prefix of this one" is a
dictionary lookup rather than a re-tokenization.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessrl.gateway.render.base import RenderError, UnsupportedContent

_ROLE_ALIASES = {"developer": "system"}
_KNOWN_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def content_text(content: Any) -> str:
    """The text of an OpenAI ``content`` field: a string, ``None`` or a list of text parts (joined by
    newlines, as vLLM does). Images, audio and files cannot be rendered by a text template."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
                continue
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("text", "input_text", "output_text"):
                texts.append(str(part.get("text", "")))
            elif kind == "refusal":
                texts.append(str(part.get("refusal", "")))
            else:
                raise UnsupportedContent(
                    f"message content part of type {kind!r} cannot be rendered in gateway render mode; "
                    "send text only or use render_mode 'engine'"
                )
        return "\n".join(texts)
    raise RenderError(f"message content must be a string or a list of parts, got {type(content).__name__}")


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments as an object when they are a JSON string (what OpenAI sends), else unchanged."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A request's messages, ready for the template, with the digest chain that identifies each prefix.

    ``prefix_digests[k]`` identifies ``messages[:k]`` (``prefix_digests[0]`` is the empty conversation).
    """

    messages: list[dict[str, Any]]
    prefix_digests: list[bytes]
    tools: list[dict[str, Any]] | None
    tools_key: bytes


def normalize_message(message: Any) -> tuple[dict[str, Any], bytes]:
    """One message as the template should see it, and its canonical key digest."""
    if not isinstance(message, dict):
        raise RenderError(f"each message must be an object, got {type(message).__name__}")
    role = _ROLE_ALIASES.get(message.get("role"), message.get("role"))
    if role not in _KNOWN_ROLES:
        raise RenderError(f"unknown message role {message.get('role')!r}; expected one of {sorted(_KNOWN_ROLES)}")
    text = content_text(message.get("content"))
    out: dict[str, Any] = {"role": role, "content": text}
    key: list[Any] = [role]
    if role == "assistant":
        # Harnesses often strip or re-pad the assistant text they send back; the sampled tokens stand.
        key.append(text.strip())
        calls = []
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                raise RenderError("each tool call must be an object")
            function = call.get("function") or {}
            name = function.get("name")
            arguments = parse_arguments(function.get("arguments", {}))
            out_call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
            if call.get("id") is not None:  # templates see no None values (as in apply_chat_template)
                out_call["id"] = call["id"]
            calls.append(out_call)
            key.append([name, arguments])
        if calls:
            out["tool_calls"] = calls
    else:
        key.append(text)
    if role == "tool":
        if message.get("tool_call_id") is not None:
            out["tool_call_id"] = message["tool_call_id"]
        key.append(message.get("tool_call_id"))
    return out, _digest(_canonical_json(key).encode())


def roll(previous: bytes, message_digest: bytes) -> bytes:
    """The digest of a conversation extended by one message."""
    return _digest(previous + message_digest)


def normalize_tools(tools: Any) -> tuple[list[dict[str, Any]] | None, bytes]:
    if not tools:
        return None, b""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RenderError("tools must be a list of objects")
    return tools, _digest(_canonical_json(tools).encode())


def normalize_conversation(messages: Any, tools: Any = None) -> Conversation:
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise RenderError("'messages' must be a non-empty list")
    normalized = []
    digests = [b""]
    for message in messages:
        out, key = normalize_message(message)
        normalized.append(out)
        digests.append(roll(digests[-1], key))
    tool_list, tools_key = normalize_tools(tools)
    return Conversation(normalized, digests, tool_list, tools_key)
