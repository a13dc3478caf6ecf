"""Reading what a harness sent (its API key, its JSON body bounded before it is read whole) and sending
a model call's JSON answer."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from harnessrl.gateway.errors import BadRequest, PayloadTooLarge


def api_key(request: Request) -> str | None:
    """The key a harness sent, in its API's own way: ``Authorization: Bearer`` (OpenAI), ``x-api-key``
    (Anthropic), ``x-goog-api-key`` or ``?key=`` (Google). The query form is read on the model routes only,
    where Google's clients send it: a key in a URL is easily logged, so no other route invites one."""
    auth = request.headers.get("authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    key = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
    if key is None and "/models" in request.url.path:
        key = request.query_params.get("key")
    return key


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request body as JSON, refusing oversize bodies before reading them whole."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"malformed JSON body: {exc}") from None


async def send_json(send: Any, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A 200 JSON answer as its two ASGI messages: what Starlette's ``Response(body,
    media_type="application/json")`` sends, without building that object for every model call."""
    raw = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]
    if headers:
        raw += headers
    await send({"type": "http.response.start", "status": 200, "headers": raw})
    await send({"type": "http.response.body", "body": body})
