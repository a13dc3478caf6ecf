"""The engine pool: routing, health checks and failover over engines that speak vLLM's OpenAI dialect.

Routing is least-outstanding-requests with rollout affinity: a rollout keeps going to the engine that
served it (its prefix is in that engine's KV cache) unless that engine is much busier than the least
loaded one. The upstream client is ``upstream.UpstreamClient`` (keep-alive pool, httptools parser): the
proxy hop is the whole overhead budget, and general-purpose clients cost several times more per request.

Load is not failure. A request is given up only when its engine sends nothing for the upstream timeout
*and* then fails a health probe; an engine is marked down when it refuses connections, answers its health
check with an error, or leaves a probe unanswered for ``dead_after_s`` (a stopped or hung process) -- and
then its requests in flight are failed at once, not when their timeout comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import orjson

from harnessrl.gateway.errors import EngineUnavailable
from harnessrl.gateway.upstream import UpstreamClient, UpstreamResponse

log = logging.getLogger(__name__)

#: Exceptions meaning "this engine did not take the request": safe to retry elsewhere.
CONNECT_ERRORS = (OSError, TimeoutError)
#: Exceptions while reading an engine's answer (connection lost, truncated body, timeout).
STREAM_ERRORS = (OSError, TimeoutError)
RETRY_STATUSES = frozenset({500, 502, 503, 504})
#: A health probe unanswered this long means the engine is gone (stopped, hung); a loaded one answers sooner.
DEAD_AFTER_S = 10.0


@dataclass(eq=False)
class Engine:
    """One engine endpoint. ``base_url`` ends in ``/v1``; health is ``GET {root}/health``."""

    id: str
    base_url: str
    model: str | None = None
    #: Prompt + completion tokens the engine's model takes (its models list's ``max_model_len``; None: unknown).
    context_window: int | None = None
    #: The models list was read (once: the model's name and its window).
    described: bool = False
    healthy: bool = True
    outstanding: int = 0
    served: int = 0

    @property
    def root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url


class EnginePool:
    def __init__(
        self,
        urls: list[str],
        *,
        model: str | None = None,
        health_interval_s: float = 2.0,
        affinity_slack: int = 4,
        timeout_s: float = 600.0,
        dead_after_s: float = DEAD_AFTER_S,
    ) -> None:
        self.engines = [
            Engine(id=f"engine-{i}", base_url=u.rstrip("/"), model=model) for i, u in enumerate(urls)
        ]
        self._fixed_model = model
        self._health_interval = health_interval_s
        self._slack = affinity_slack
        self._timeout = timeout_s
        self._dead_after = dead_after_s
        self._affinity: dict[str, Engine] = {}
        #: Calls in flight per upstream model name: a publisher that keeps serving an old adapter during an
        #: update (``[engine] on_update = "keep"``) unloads it when its count is back to 0.
        self.in_flight_models: dict[str, int] = {}
        self._client: UpstreamClient | None = None
        self._health_task: asyncio.Task | None = None

    async def start(self) -> None:
        self._client = UpstreamClient(timeout_s=self._timeout)
        await self.check_health()
        self._health_task = asyncio.create_task(self._health_loop(), name="harnessrl-engine-health")

    async def close(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._health_task
        if self._client is not None:
            await self._client.close()

    @property
    def client(self) -> UpstreamClient:
        assert self._client is not None, "EnginePool.start() was not awaited"
        return self._client

    # -- routing --------------------------------------------------------------------------------------
    @property
    def context_window(self) -> int | None:
        """The smallest context window the engines report (None while none has reported one)."""
        known = [e.context_window for e in self.engines if e.context_window is not None]
        return min(known) if known else None

    def pick(self, rollout_id: str, exclude: set[Engine] | None = None) -> Engine:
        """The engine for this rollout's next request, or ``EngineUnavailable``."""
        candidates = [e for e in self.engines if e.healthy and (not exclude or e not in exclude)]
        if not candidates:
            down = ", ".join(f"{e.id} ({e.base_url})" for e in self.engines) or "none configured"
            raise EngineUnavailable(
                f"no engine is available to serve the request (engines: {down}); check that they are "
                "running and answer GET /health"
            )
        least = min(candidates, key=lambda e: (e.outstanding, e.served))  # ties: spread new rollouts
        sticky = self._affinity.get(rollout_id)
        if sticky is not None and sticky in candidates and sticky.outstanding <= least.outstanding + self._slack:
            return sticky
        if len(self._affinity) > 100_000:  # bounded: drop the oldest affinity
            self._affinity.pop(next(iter(self._affinity)))
        self._affinity[rollout_id] = least
        return least

    def forget(self, rollout_id: str) -> None:
        self._affinity.pop(rollout_id, None)

    def mark_down(self, engine: Engine, why: str) -> None:
        if engine.healthy:
            log.warning("engine %s (%s) marked down: %s", engine.id, engine.base_url, why)
        engine.healthy = False

    # -- upstream requests ----------------------------------------------------------------------------
    async def post(self, engine: Engine, path: str, body: dict) -> UpstreamResponse:
        """POST ``body`` to the engine; the caller reads/iterates and releases the response."""
        return await self.client.post(engine.base_url + path, orjson.dumps(body),
                                      stall_check=lambda: self.probe(engine))

    # -- health ---------------------------------------------------------------------------------------
    async def probe(self, engine: Engine) -> bool:
        """Whether the engine answers ``GET /health`` with 200 within ``dead_after_s`` (it is alive)."""
        return await self._health(engine) is None

    async def _health(self, engine: Engine) -> str | None:
        """None when the engine answers its health check with 200, else why not."""
        try:
            r = await self.client.get(engine.root + "/health", timeout_s=self._dead_after)
            await r.read()
            r.release()
        except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
            return f"{type(exc).__name__}: {exc}"
        return None if r.status == 200 else f"GET /health answered {r.status}"

    async def check_health(self) -> None:
        await asyncio.gather(*(self._check(e) for e in self.engines))

    async def _check(self, engine: Engine) -> None:
        why = await self._health(engine)
        if why is None and not engine.described:
            try:
                r = await self.client.get(engine.base_url + "/models", timeout_s=self._dead_after)
                data = orjson.loads(await r.read()).get("data") or []
                r.release()
                if engine.model is None:
                    engine.model = data[0]["id"] if data else None
                window = data[0].get("max_model_len") if data else None
                engine.context_window = window if type(window) is int and window > 0 else None
                engine.described = engine.model is not None
            except Exception as exc:  # noqa: BLE001 - any failure means unhealthy, unless the model is named
                if engine.model is None:
                    why = f"GET /v1/models: {type(exc).__name__}: {exc}"
                else:  # served under a configured name: its window stays unknown (max_tokens as asked)
                    engine.described = True
        if why is None:
            if not engine.healthy:
                log.info("engine %s (%s) is healthy again", engine.id, engine.base_url)
            engine.healthy = True
            return
        self.mark_down(engine, why)
        if not why.startswith("GET "):  # no answer at all (refused, stopped, hung): its requests cannot finish
            aborted = self.client.abort(engine.base_url, f"engine {engine.id} is down: {why}")
            if aborted:
                log.warning("engine %s: %d requests in flight failed (%s)", engine.id, aborted, why)

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self._health_interval)
            try:
                await self.check_health()
            except Exception:  # noqa: BLE001 - keep checking
                log.exception("engine health check failed")

    def status(self) -> list[dict]:
        return [
            {"id": e.id, "base_url": e.base_url, "model": e.model, "healthy": e.healthy,
             "outstanding": e.outstanding, "served": e.served}
            for e in self.engines
        ]
