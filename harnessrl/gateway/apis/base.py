"""What every API translation module shares: the translated request and small typed readers.

A translation module turns one API's request into the internal request (an OpenAI chat body, the
engine's own dialect) plus ``notes`` -- what was adapted to serve it (fields ignored, hosted tools
dropped, tool groups flattened) -- which the gateway records with the call. It never touches budgets,
pausing or the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessrl.gateway.errors import BadRequest

#: Prefix of the flat name a tool group's tool gets ("<group>__<tool>", as Codex flattens namespaces).
GROUP_SEP = "__"
#: The data payload that closes an OpenAI-style SSE stream: engines end with it, the gateway passes it on.
DONE = b"[DONE]"


@dataclass(slots=True)
class ToolName:
    """How a flat function name the policy sees maps back to what the harness declared."""

    name: str
    namespace: str | None = None
    kind: str = "function"  # "function", or "custom" (free-form input: one string argument "input")


@dataclass(slots=True)
class Translation:
    """One harness request in the internal (chat) form, with what was adapted to serve it."""

    chat: dict[str, Any]
    notes: dict[str, Any] = field(default_factory=dict)
    names: dict[str, ToolName] = field(default_factory=dict)
    #: The served policy reads images (``[gateway] images = "pass"``): a user turn's images become chat
    #: ``image_url`` parts; otherwise every image is refused (``unsupported_media``), on every API alike.
    images: bool = False

    def image(self, url: str, kind: str, where: str) -> dict[str, Any]:
        """The chat part of an image a user turn carries, or the refusal when the policy reads text only."""
        if not self.images:
            raise unsupported_media(kind, where)
        self.notes["images"] = self.notes.get("images", 0) + 1
        return {"type": "image_url", "image_url": {"url": url}}

    def note(self, key: str, value: Any) -> None:
        """Add ``value`` to the list under ``key`` (once)."""
        items = self.notes.setdefault(key, [])
        if value not in items:
            items.append(value)


def kind(obj: dict[str, Any], default: str | None = None) -> str | None:
    """An object's ``type`` when it is a string (anything else reads as an unknown kind)."""
    value = obj.get("type", default)
    return value if isinstance(value, str) or value is None else repr(value)[:40]


def flat_name(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('_')}{GROUP_SEP}{name.lstrip('_')}"


def expect_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{where} must be an object, not {type(value).__name__}")
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadRequest(f"{where} must be a list, not {type(value).__name__}")
    return value


def expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{where} must be a string, not {type(value).__name__}")
    return value


def optional_number(body: dict[str, Any], key: str) -> float | int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadRequest(f"'{key}' must be a number")
    return v


def optional_int(body: dict[str, Any], key: str, minimum: int = 1) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if type(v) is not int or v < minimum:
        raise BadRequest(f"'{key}' must be an integer >= {minimum}")
    return v


def json_schema(value: Any, where: str) -> dict[str, Any]:
    """A tool's parameter schema: an object, or the empty object schema when absent."""
    if value is None:
        return {"type": "object", "properties": {}}
    return expect_dict(value, where)


def unsupported_media(kind: str, where: str, images: bool = False) -> BadRequest:
    """The one refusal of media every API gives ([gateway] images decides what a policy reads)."""
    if images:
        return BadRequest(
            f"{where}: content of type {kind!r} cannot be served: the policy behind this gateway reads text and "
            "the images of user turns only (not documents, audio or video, nor images elsewhere). Remove it "
            "(or describe it in text) and retry.", code="unsupported_content")
    return BadRequest(
        f"{where}: content of type {kind!r} cannot be served: the policy behind this gateway reads text "
        "only. Remove the image/document (or describe it in text) and retry.", code="unsupported_content")


def data_url(media_type: Any, data: Any, where: str) -> str:
    """A base64 image as the ``data:`` URL chat image parts carry."""
    return f"data:{expect_str(media_type, f'{where}.media_type')};base64,{expect_str(data, f'{where}.data')}"


def parts_content(parts: list[str | dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A chat message's content: the joined text, or (with images among it) text and image parts in order."""
    if all(isinstance(p, str) for p in parts):
        return "".join(p for p in parts if isinstance(p, str))
    return [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts if p != ""]


#: Content types that carry media a text-only policy cannot read.
MEDIA_TYPES = frozenset({"image", "document", "input_image", "input_file", "input_audio", "image_url",
                         "file", "audio", "video"})


#: Numeric sampling fields and whether they must be integers.
_NUMBERS = {"temperature": False, "top_p": False, "min_p": False, "presence_penalty": False,
            "frequency_penalty": False, "repetition_penalty": False, "top_k": True, "seed": True,
            "top_logprobs": True}
#: Most choices one request may ask for (each is sampled and recorded).
MAX_N = 128


def validate_common(body: dict[str, Any]) -> None:
    """The fields chat and completions bodies share: model, lengths, sampling numbers, stop, flags."""
    if "model" in body and not isinstance(body["model"], str | None):
        raise BadRequest("'model' must be a string")
    for key in ("n", "max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None and (type(v) is not int or v < 1):
            raise BadRequest(f"'{key}' must be a positive integer")
    if (body.get("n") or 1) > MAX_N:
        raise BadRequest(f"'n' may be at most {MAX_N}")
    for key, integer in _NUMBERS.items():
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int if integer else int | float)):
            raise BadRequest(f"'{key}' must be {'an integer' if integer else 'a number'}")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(x, str) for x in stop)):
        raise BadRequest("'stop' must be a string or a list of strings")
    for key in ("stream", "return_token_ids", "parallel_tool_calls"):
        if key in body and not isinstance(body[key], bool | None):
            raise BadRequest(f"'{key}' must be true or false")
    for key in ("stream_options", "logit_bias", "response_format", "chat_template_kwargs", "metadata"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise BadRequest(f"'{key}' must be an object")
