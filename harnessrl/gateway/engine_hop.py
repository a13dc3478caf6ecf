"""The hop to the engine: pick one, send, fail over while nothing reached the harness, fit the context.

An engine that cannot be reached, or answers 5xx, is left for another; an engine's context-length refusal
is answered by asking again with what the context has room for (the plan records requested vs granted),
or, when the prompt alone does not fit, by an error naming both numbers.
"""

from __future__ import annotations

import re

import orjson

from harnessrl.gateway.dialect import Plan
from harnessrl.gateway.errors import EngineUnavailable, LimitExceeded, UpstreamError
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
            raise upstream_error(resp.status, data, engine)


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
    plan.sampling.setdefault("max_tokens_requested", plan.upstream.get("max_tokens"))
    plan.upstream["max_tokens"] = plan.sampling["max_tokens"] = plan.max_tokens = room
    return True


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
