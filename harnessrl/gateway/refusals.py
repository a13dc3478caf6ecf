"""Refusals a harness can see from both ends: the error it reads, and a WARNING line in the gateway's log.

Requests no route serves are answered in the JSON error shape of the API the request speaks; a call a
rollout route refuses before it reaches the engine (no or wrong key, a body too large or malformed, a
request the API's rules refuse) is logged with the rollout, the route, the status, the code and the
message the harness got (messages name keys, indices and types, never prompt text).

A harness that speaks an API the gateway does not serve (Google's Gemini API, an old path, a wrong base URL)
used to get Starlette's plain-text ``Not Found``, which its client reports as a parse error, and the gateway
said nothing. Now the client reads an error it understands -- OpenAI's ``{"error": {...}}``, Anthropic's
``{"type": "error", ...}`` or Google's ``{"error": {"code", "message", "status"}}`` -- naming the method, the
path and what is served, and the gateway logs one WARNING line with the method, the path and the status
(never the query string, which may carry a key, nor the body).
"""

from __future__ import annotations

import logging
from typing import Literal

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from harnessrl.gateway.apis import anthropic
from harnessrl.gateway.errors import GatewayError

log = logging.getLogger("harnessrl.gateway")

Family = Literal["openai", "anthropic", "google"]

SERVED = ("the gateway serves, under a rollout's base URL /r/<rollout>/v1: chat/completions, completions, "
          "responses, models (OpenAI) and messages, messages/count_tokens (Anthropic); docs/gateway.md")

_GOOGLE_STATUS = {404: "NOT_FOUND", 405: "UNIMPLEMENTED"}


def family(request: Request) -> Family:
    """Which API a request speaks, read from its path and headers (it cannot be routed, so nothing else)."""
    path = request.url.path
    if "/v1beta/" in path or ":generateContent" in path or ":streamGenerateContent" in path \
            or "x-goog-api-key" in request.headers:
        return "google"
    if "anthropic-version" in request.headers or path.rstrip("/").endswith("/messages") or "/messages/" in path:
        return "anthropic"
    return "openai"


def error_body(kind: Family, status: int, message: str) -> dict:
    """The error in ``kind``'s shape, with the code ``unknown_route`` where the shape has a code."""
    if kind == "anthropic":
        return anthropic.error_body(status, message, "unknown_route")
    if kind == "google":
        return {"error": {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}}
    return GatewayError(message, status=status, code="unknown_route").body()


async def unknown_route(request: Request, exc: Exception) -> Response:
    """Starlette's handler for 404 and 405 raised by routing: the JSON error, and the WARNING line."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    what = "no route" if status == 404 else "method not allowed"
    message = f"{what}: {request.method} {request.url.path}; {SERVED}"
    kind = family(request)
    log.warning("refused %s %s: %d unknown_route (%s API, by its path and headers)", request.method,
                request.url.path, status, kind)
    headers = getattr(exc, "headers", None)
    return Response(orjson.dumps(error_body(kind, status, message)), status_code=status,
                    media_type="application/json", headers=headers)


def log_refused(request: Request, rollout_id: str, exc: GatewayError) -> None:
    """One WARNING line for a call refused before it was served (``CallHandler``)."""
    log.warning("rollout %s: refused %s %s: %d %s: %s", rollout_id, request.method, request.url.path, exc.status,
                exc.code, exc.message[:300])
