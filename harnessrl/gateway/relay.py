"""Relaying an engine's SSE stream to the harness while accumulating the complete call.

The harness gets each chunk as it comes, except the latest one, which is held back until the call is
committed: the final chunk and ``[DONE]`` are only sent once the call is in the store.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from harnessrl.gateway import dialect
from harnessrl.gateway.errors import GatewayError, RolloutClosedError, UpstreamError
from harnessrl.gateway.pool import STREAM_ERRORS, Engine
from harnessrl.gateway.rollouts import RolloutState
from harnessrl.gateway.stream import DONE, StreamAccumulator, sse_data
from harnessrl.gateway.upstream import UpstreamResponse
from harnessrl.store.base import RolloutClosed
from harnessrl.types import ApiKind, CallStatus

if TYPE_CHECKING:
    from harnessrl.gateway.proxy import Proxy

log = logging.getLogger(__name__)
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class Relay:
    """ASGI response that relays an engine stream, recording the call before the final chunk.

    Written as a plain ASGI callable (not a generator) so that cleanup -- engine and pause-gate counts --
    runs even when the response is never iterated.
    """

    def __init__(self, proxy: Proxy, state: RolloutState, api: ApiKind, body: dict, plan: dialect.Plan,
                 engine: Engine, resp: UpstreamResponse, version: int, t0: float) -> None:
        self.p, self.state, self.api, self.body, self.plan = proxy, state, api, body, plan
        self.engine, self.resp, self.version, self.t0 = engine, resp, version, t0
        self.model = body.get("model") or proxy.config.model_name
        self.sent = False  # whether any chunk reached the harness (then no failover)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        recorded = False
        acc = StreamAccumulator(self.api)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            while True:
                acc = StreamAccumulator(self.api)
                try:
                    pending = await self._relay(acc, send)
                    break
                except (*STREAM_ERRORS, _StreamFailed) as exc:
                    err = f"engine {self.engine.id} failed mid-stream: {type(exc).__name__}: {exc}"
                    if self.sent:
                        raise _Abort(err) from exc
                    # Nothing reached the harness yet: retry on another engine.
                    self._release()
                    self.p.pool.mark_down(self.engine, err)
                    try:
                        self.engine, self.resp = await self.p.open(
                            self.state.id, self.api, self.plan, exclude={self.engine})
                    except GatewayError as exc2:
                        raise _Abort(exc2.message) from exc2
            prompt, choices = acc.prompt(), acc.choices()
            version = acc.policy_version if acc.policy_version is not None else self.version
            call = self.p._call(self.state, self.api, self.body, self.plan, prompt, choices, version,
                                self.engine, self.t0)
            call.response = acc.response()
            call.response["model"] = self.model
            try:
                index = await self.p.recorder.record(call)
            except RolloutClosed as exc:
                recorded = True
                self.p.registry.mark_closed(self.state.id)
                await self._send_error(send, RolloutClosedError(str(exc)))
                return
            recorded = True
            self.p._account(self.state, prompt, choices)
            log.debug("streamed call %s/%d recorded", self.state.id, index)
            await send({"type": "http.response.body", "body": (pending or b"") + b"data: [DONE]\n\n",
                        "more_body": False})
        except _Abort as exc:
            err = UpstreamError(str(exc), status=502)
            call = self.p._call(self.state, self.api, self.body, self.plan, acc.prompt(), acc.choices(),
                                self.version, self.engine, self.t0, CallStatus.ERROR, err.message)
            call.response = err.body()
            recorded = True
            try:
                await self.p.recorder.record(call)
            finally:
                await self._send_error(send, err)
        except (asyncio.CancelledError, Exception) as exc:
            if not recorded:  # keep what was sampled, even when the response could not be finished
                cancelled = isinstance(exc, asyncio.CancelledError)
                call = self.p._call(self.state, self.api, self.body, self.plan, acc.prompt(), acc.choices(),
                                    self.version, self.engine, self.t0,
                                    CallStatus.CANCELLED if cancelled else CallStatus.ERROR,
                                    "client went away" if cancelled else f"gateway error: {exc!r}")
                self.p.recorder.record_nowait(call)
            raise
        finally:
            self._release()
            self.p.gate.exit()

    async def _relay(self, acc: StreamAccumulator, send: Any) -> bytes | None:
        """Forward chunks, holding the latest one back; returns it once the engine says ``[DONE]``."""
        pending: bytes | None = None
        strip = dialect.strip
        want_lp, want_ids = self.plan.want_logprobs, self.plan.want_token_ids
        async for data in sse_data(self.resp):
            if data == DONE.encode():
                return pending
            chunk = orjson.loads(data)
            if "error" in chunk and not chunk.get("choices"):
                raise _StreamFailed(str(chunk["error"]))
            acc.add(chunk)
            chunk["model"] = self.model
            out = b"data: " + orjson.dumps(strip(chunk, want_lp, want_ids)) + b"\n\n"
            if pending is not None:
                self.sent = True
                await send({"type": "http.response.body", "body": pending, "more_body": True})
            pending = out
        raise _StreamFailed("the engine closed the stream before [DONE]")

    def _release(self) -> None:
        if self.resp is not None:
            self.resp.release()
            self.resp = None  # type: ignore[assignment]
            self.engine.outstanding -= 1

    async def _send_error(self, send: Any, err: GatewayError) -> None:
        payload = b"data: " + orjson.dumps(err.body()) + b"\n\ndata: [DONE]\n\n"
        await send({"type": "http.response.body", "body": payload, "more_body": False})


class _StreamFailed(Exception):
    """The engine stream broke (an error event, or it ended without ``[DONE]``)."""


class _Abort(Exception):
    """Give up on a stream: record it as failed and tell the harness in-band."""
