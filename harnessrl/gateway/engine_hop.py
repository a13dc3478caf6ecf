"""The hop to the engine: pick one, send, fail over while nothing reached the harness, fit the context.

An engine that cannot be reached, or answers 5xx, is left for another; an engine's context-length refusal
is answered by asking again with what the context has room for (the plan records requested vs granted),
or, when the prompt alone does not fit, by an error naming both numbers.

Errors are classed by cause, because a 5xx makes the attempt ``infra`` (re-run, never scored): an engine's
4xx -- in the status or, as vLLM sends some once a stream began, in-band -- stays a 4xx, and so does a 500
from an engine that still answers its health check (the request is what it could not serve). Only an
engine that is gone, unreachable or busy makes a 5xx.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import orjson

from harnessrl.gateway.dialect import Plan
from harnessrl.gateway.errors import EngineUnavailable, GatewayError, LimitExceeded, UpstreamError
from harnessrl.gateway.pool import CONNECT_ERRORS, RETRY_STATUSES, Engine, EnginePool
from harnessrl.gateway.upstream import UpstreamResponse

_WINDOW = re.compile(rb"maximum (?:context|model) length (?:is|of) (\d+)")
_PROMPT = re.compile(rb"\((\d+) in the (?:messages|prompt)|has (\d+) input tokens|prompt has (\d+) tokens"
                     rb"|prompt \(length (\d+)\)")


class EngineHop:
    def __init__(self, pool: EnginePool, fixed_model: str | None) -> None:
        self.pool = pool
        self._fixed_model = fixed_model

    async def open(self, rid: str, path: str, plan: Plan,
                   exclude: set[Engine] | None = None) -> tuple[Engine, UpstreamResponse]:
        """Send the plan's request to an engine; returns the engine (its ``outstanding`` count taken) and a
        200 response, or raises a ``GatewayError``."""
        tried: set[Engine] = set(exclude or ())
        last = ""
        while True:
            try:
                engine = self.pool.pick(rid, tried)
            except EngineUnavailable as exc:
                if last:
                    exc.message += f"; last error: {last}"
                raise
            if engine.model and not self._fixed_model and not plan.pinned_model:
                plan.upstream["model"] = engine.model
            engine.outstanding += 1
            try:
                resp = await self.pool.post(engine, path, plan.upstream)
            except (TimeoutError, *CONNECT_ERRORS) as exc:
                engine.outstanding -= 1
                self.pool.mark_down(engine, f"{type(exc).__name__}: {exc}")
                tried.add(engine)
                last = f"{engine.id}: {type(exc).__name__}: {exc}"
                continue
            if resp.status == 200:
                engine.served += 1
                return engine, resp
            data = await resp.read()
            resp.release()
            engine.outstanding -= 1
            if resp.status == 400 and fit_context(plan, data):
                continue  # asked again with what the context has room for
            if resp.status in RETRY_STATUSES:
                tried.add(engine)
                last = f"{engine.id}: HTTP {resp.status} {data[:200]!r}"
                if len(tried) < len(self.pool.engines):
                    continue
            error = upstream_error(resp.status, data, engine)
            if resp.status == 500 and await self.pool.probe(engine):
                error = refused_by_live_engine(error)  # the engine lives: this request is what it cannot serve
            raise error


def fit_context(plan: Plan, data: bytes) -> bool:
    """After an engine's context-length refusal: lower ``max_tokens`` to what the context has room for
    and return True (ask again), or raise a clear error when the prompt alone does not fit."""
    window, prompt = _WINDOW.search(data), _PROMPT.search(data)
    if window is None or prompt is None:
        return False
    size, plen = int(window.group(1)), int(next(g for g in prompt.groups() if g))
    room = size - plen
    if room < 1:
        raise LimitExceeded(
            f"the prompt has {plen} tokens but the model's context is {size} tokens, which leaves no room for "
            "an answer; shorten the conversation or serve a model with a longer context",
            code="context_length_exceeded")
    if plan.upstream.get("max_tokens", 0) <= room:
        return False  # not a max_tokens problem: pass the engine's own error on
    if plan.asked is not None:  # what the harness asked for (not a limit the gateway sent for it)
        plan.sampling.setdefault("max_tokens_requested", plan.asked)
        plan.sampling["max_tokens_clamp"] = "context"
    plan.upstream["max_tokens"] = plan.sampling["max_tokens"] = plan.max_tokens = room
    return True


def refused_by_live_engine(error: UpstreamError) -> UpstreamError:
    """An engine's 500 to a request, from an engine that answers its health check: 422, the request's."""
    return UpstreamError(f"{error.message} (the engine is alive and serving: this request is what it could not "
                         "serve; change the request)", status=422, code="engine_rejected_request")


def refused_in_band(chunk: Any, engine: Engine, plan: Plan) -> GatewayError | None:
    """The request's error for an engine's in-band error event with a 4xx code (vLLM checks some requests,
    e.g. their length, after the stream began), or None when the event blames the engine."""
    err = chunk.get("error") if isinstance(chunk, dict) else None
    if not isinstance(err, dict):
        return None
    code = err.get("code")
    status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else None
    if status is None and err.get("type") in ("BadRequestError", "invalid_request_error"):
        status = 400
    if status is None or not 400 <= status < 500:
        return None
    message = str(err.get("message") or "")
    probe = dataclasses.replace(plan, upstream=dict(plan.upstream), sampling=dict(plan.sampling))
    try:
        fit_context(probe, message.encode())  # the prompt alone does not fit: the same error as out of band
    except LimitExceeded as exc:
        return exc
    return UpstreamError(f"engine {engine.id} refused the request: {message}", status=status,
                         code=str(code) if isinstance(code, str) and not code.isdigit() else "engine_refused_request")


def upstream_error(status: int, data: bytes, engine: Engine) -> UpstreamError:
    try:
        err = orjson.loads(data).get("error") or {}
        message = err.get("message") if isinstance(err, dict) else str(err)
    except (orjson.JSONDecodeError, AttributeError):
        err, message = {}, data[:500].decode(errors="replace")
    code = err.get("code") if isinstance(err, dict) else None
    out_status = status if 400 <= status < 500 else 502
    return UpstreamError(f"engine {engine.id} answered HTTP {status}: {message}", status=out_status,
                         code=str(code) if code is not None else "engine_error")
