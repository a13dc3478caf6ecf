"""Refusals a harness can see from both ends: the error it reads, and a WARNING line in the gateway's log.

Requests no route serves are answered in the JSON error shape of the API the request speaks; a call a
rollout route refuses before it reaches the engine (no or wrong key, a body too large or malformed, a
request the API's rules refuse) is logged with the rollout, the route, the status, the code and the
message the harness got (messages name keys, indices and types, never prompt text), and recorded on the
rollout as a call with status ``refused`` (the request, redacted as every call is; the error it was answered
with), so ``harnessrl show`` and the dashboard list it beside the served calls. A request that cannot be tied
to a rollout (an unknown rollout, a wrong key) is only logged: a record there would let anyone write into a
rollout.

A harness that speaks an API the gateway does not serve (Google's Gemini API, an old path, a wrong base URL)
used to get Starlette's plain-text ``Not Found``, which its client reports as a parse error, and the gateway
said nothing. Now the client reads an error it understands -- OpenAI's ``{"error": {...}}``, Anthropic's
``{"type": "error", ...}`` or Google's ``{"error": {"code", "message", "status"}}`` -- naming the method, the
path and what is served, and the gateway logs one WARNING line with the method, the path and the status
(never the query string, which may carry a key, nor the body).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from harnessrl.gateway.apis import anthropic, gemini
from harnessrl.gateway.call_lane import match
from harnessrl.gateway.errors import GatewayError
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus

log = logging.getLogger("harnessrl.gateway")

Family = Literal["openai", "anthropic", "google"]

SERVED = ("the gateway serves, under a rollout's base URL /r/<rollout>/v1 (or /r/<rollout>): chat/completions, "
          "completions, responses (HTTP POST; not its WebSocket mode), models (OpenAI) and messages, "
          "messages/count_tokens (Anthropic); under /r/<rollout>/v1beta (or /v1, or none): models, "
          "models/<model>:generateContent, :streamGenerateContent, :countTokens (Google Gemini); docs/gateway.md")

def family(request: Request) -> Family:
    """Which API a request speaks, read from its path and headers (it cannot be routed, so nothing else)."""
    path = request.url.path
    if "/v1beta/" in path or path.endswith("/v1beta") or ":generateContent" in path \
            or ":streamGenerateContent" in path or ":countTokens" in path or "x-goog-api-key" in request.headers:
        return "google"
    if "anthropic-version" in request.headers or path.rstrip("/").endswith("/messages") or "/messages/" in path:
        return "anthropic"
    return "openai"


def error_body(kind: Family, status: int, message: str, code: str = "unknown_route") -> dict:
    """The error in ``kind``'s shape, with ``code`` where the shape has a code."""
    if kind == "anthropic":
        return anthropic.error_body(status, message, code)
    if kind == "google":
        return gemini.error_body(status, message, code)
    return GatewayError(message, status=status, code=code).body()


#: The rollout a path names, when it is under a rollout's base URL.
_ROLLOUT_PATH = re.compile(r"^/r/([^/]+)/")


def rollout_of(path: str) -> str | None:
    """The rollout id of a path under ``/r/<rollout>/``, or None."""
    m = _ROLLOUT_PATH.match(path)
    return m.group(1) if m else None


def route_refusal(request: Request, exc: Exception) -> tuple[GatewayError, Family]:
    """What routing's 404 or 405 becomes: the error (code ``unknown_route``, naming what is served) and
    the API family whose shape it is answered in. A WebSocket handshake on the Responses path is answered
    426 instead (``websocket_refusal``)."""
    if wants_websocket(request) and api_of(request) == ApiKind.RESPONSES:
        return websocket_refusal(request), "openai"
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    what = "no route" if status == 404 else "method not allowed"
    message = f"{what}: {request.method} {request.url.path}; {SERVED}"
    return GatewayError(message, status=status, code="unknown_route"), family(request)


def wants_websocket(request: Request) -> bool:
    """A WebSocket handshake (Codex opens its Responses WebSocket transport with one before any POST)."""
    return request.scope["type"] == "websocket" or request.headers.get("upgrade", "").lower() == "websocket"


def websocket_refusal(request: Request) -> GatewayError:
    """The Responses WebSocket transport is not served: 426 Upgrade Required is the one answer on which
    Codex falls back to HTTP at once (``WebsocketStreamOutcome::FallbackToHttp`` in codex-rs/core's
    client.rs) and for the rest of its session; a 403, 404 or 405 it retries as a failed stream (about 6 s
    lost per attempt)."""
    message = (f"the Responses API's WebSocket mode is not served: {request.method} {request.url.path}; "
               "send POST (HTTP, streamed with server-sent events) to the same path instead")
    return GatewayError(message, status=426, code="websocket_unsupported")


def api_of(request: Request) -> ApiKind:
    """The API a refused request is recorded under: the one its path names (a GET on ``.../responses`` is a
    Responses call refused), else the one its family speaks."""
    found = match(request.url.path)
    if found is not None:
        return found[0]
    return {"anthropic": ApiKind.ANTHROPIC_MESSAGES, "google": ApiKind.GEMINI}.get(family(request), ApiKind.CHAT)


def unknown_route_response(refusal: GatewayError, kind: Family, exc: Exception) -> Response:
    """The refusal as JSON in ``kind``'s shape (a 405 keeps routing's ``Allow`` header)."""
    headers = getattr(exc, "headers", None)
    return Response(orjson.dumps(error_body(kind, refusal.status, refusal.message, refusal.code or "unknown_route")), status_code=refusal.status,
                    media_type="application/json", headers=headers)


def log_unknown_route(request: Request, refusal: GatewayError, kind: Family) -> None:
    """The WARNING line of an unknown route not tied to an authorized rollout."""
    log.warning("refused %s %s: %d %s (%s API, by its path and headers)", request.method,
                request.url.path, refusal.status, refusal.code, kind)


def log_refused(request: Request, rollout_id: str, exc: GatewayError) -> None:
    """One WARNING line for a call refused before it was served (``CallHandler``)."""
    log_failed(rollout_id, request.method, request.url.path, exc)


def log_failed(rollout_id: str, method: str, path: str, exc: GatewayError, what: str = "refused") -> None:
    """One WARNING line for a call answered with an error: the rollout, the route, the status, the code and
    the message the harness got (the path carries no query string; messages never quote prompt text)."""
    log.warning("rollout %s: %s %s %s: %d %s: %s", rollout_id, what, method, path, exc.status, exc.code,
                exc.message[:300])


def refused_call(rollout_id: str, api: ApiKind, body: Any, exc: GatewayError, version: int,
                 latency_s: float, route: str, model: str | None = None) -> NewCall:
    """The record of a call refused before the engine was asked: the request as sent (a body that is not a
    JSON object is kept under ``"body"``; an unreadable one is not kept), the error answered, nothing sampled.
    ``model``: the model asked for where the body does not name it (Gemini's is in the path)."""
    if isinstance(body, dict):
        request = body
    else:
        request = {} if body is None else {"body": body}
    model = model or request.get("model")
    return NewCall(rollout_id=rollout_id, api=api, status=CallStatus.REFUSED, request=request,
                   response=exc.body(), prompt_token_ids=[], choices=[], policy_version=version,
                   requested_model=model if isinstance(model, str) else None, sampling={"route": route},
                   latency_s=latency_s, error=f"{exc.status} {exc.code}: {exc.message}")
