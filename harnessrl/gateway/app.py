"""The gateway application: wiring of pool, recorder, registry and pause gate into Starlette routes.

``Gateway`` is the object (build it with a store and a config); ``Gateway.app`` is the ASGI app (the model-call
lane, ``call_lane.py``, in front of the Starlette app ``Gateway.routes``);
``serve_in_thread`` runs it under uvicorn in a background thread for in-process use (controller, tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from harnessrl.gateway.admin import AdminApi, json_response
from harnessrl.gateway.apis import gemini
from harnessrl.gateway.call import CallHandler, Services, error_response
from harnessrl.gateway.call_lane import CallLane
from harnessrl.gateway.call_lane import routes as call_routes
from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.engine_hop import EngineHop
from harnessrl.gateway.errors import BadRequest, GatewayError, RolloutClosedError
from harnessrl.gateway.http import api_key, read_json
from harnessrl.gateway.pause_gate import PauseGate
from harnessrl.gateway.plugins import GatewayPlugin, PluginFactory
from harnessrl.gateway.pool import EnginePool
from harnessrl.gateway.recorder import Recorder, record_on, token_redactor
from harnessrl.gateway.refusals import (
    api_of,
    family,
    log_unknown_route,
    rollout_of,
    route_refusal,
    unknown_route_response,
)
from harnessrl.gateway.render_seam import load_renderer
from harnessrl.gateway.rollout_registry import RolloutRegistry
from harnessrl.redaction.text import Redactor
from harnessrl.rewards.posted import SCORING_NAMES
from harnessrl.store.base import RolloutClosed, Store
from harnessrl.types import ApiKind

if TYPE_CHECKING:
    from harnessrl.gateway.apis.base import Translation
    from harnessrl.gateway.config import GatewayLimits
    from harnessrl.gateway.render.base import ChatRenderer
    from harnessrl.gateway.rollout_registry import RolloutState

log = logging.getLogger(__name__)


class Gateway:
    """The recording gateway over one store and a pool of engines.

    ``plugins``: features served beside the rollout routes (production mode: ``production.plugin``), each
    built on a ``PluginHost`` of this gateway (``plugins.py``).
    """

    def __init__(self, store: Store, config: GatewayConfig | None = None,
                 renderer: ChatRenderer | None = None, plugins: Sequence[PluginFactory] = ()) -> None:
        self.config = config = config or GatewayConfig()
        self.store = store
        self.admin_token = config.admin_token or os.environ.get("HARNESSRL_ADMIN_TOKEN") or ""
        self.generated_admin_token = not self.admin_token
        #: Opens the dashboard at /ui only (read-only), never the admin API.
        self.viewer_token = config.viewer_token or os.environ.get("HARNESSRL_VIEWER_TOKEN") or None
        if not self.admin_token:
            self.admin_token = "hrl-admin-" + secrets.token_urlsafe(24)
        versions = store.list_policy_versions()
        self.gate = PauseGate(config.limits.pause_timeout_s,
                              max((v.version for v in versions), default=0))
        self.pool = EnginePool(config.engines, model=config.engine_model,
                               health_interval_s=config.health_interval_s,
                               affinity_slack=config.affinity_slack, timeout_s=config.limits.upstream_timeout_s)
        if renderer is None and config.render_mode == "gateway":
            renderer = load_renderer(config)
        if config.limits.max_tokens_per_call is not None:  # a cap changes what harnesses get: said once
            log.info("gateway: max_tokens_per_call = %d: a call asking for more, or for none, is served at most "
                     "%d tokens (each such call records what it asked; counted in `harnessrl show`)",
                     config.limits.max_tokens_per_call, config.limits.max_tokens_per_call)
        self.recorder = Recorder(store, Redactor(config.redact_patterns), config.record_batch_max,
                                 on=record_on(config.record_inline), tokens=token_redactor(config, renderer))
        self.registry = RolloutRegistry(store)
        self.router = _router(config)
        self.calls = CallHandler(Services(config, self.pool, self.recorder, self.registry, self.gate,
                                          EngineHop(self.pool, config.engine_model), renderer, self.router))
        self.registry.on_load = self.calls.reload
        self.registry.on_close = getattr(renderer, "forget", None)
        self.url: str | None = None  # set once serving
        self._background: list[tuple[Callable[[], Awaitable[Any]], float, bool]] = []
        self._tasks: list[asyncio.Task] = []
        self._serving = False
        self.admin = AdminApi(self)
        host = _Host(self)
        #: The plug-ins (production mode's deployed applications under /p/, ...), in the order given.
        self.plugins: list[GatewayPlugin] = [make(host) for make in plugins]
        for plugin in self.plugins:
            for p in plugin.periodic():
                self.add_background(p.task, p.interval_s, final=p.final)
        #: Starlette serves every route; the model-call routes reach their handler through ``call_lane`` first.
        self.routes = self._build_app()
        self.app = CallLane(ProxyHeadersMiddleware(self.routes, trusted_hosts=_forwarded_allow_ips()),
                            self.calls.handle)

    def public_url(self, request: Request) -> str:
        if self.config.public_url:
            return self.config.public_url.rstrip("/")
        return str(request.base_url).rstrip("/")

    # -- lifecycle --------------------------------------------------------------------------------------
    def add_background(self, task: Callable[[], Awaitable[Any]], interval_s: float, *, final: bool = False) -> None:
        """Run ``task()`` every ``interval_s`` while serving (a plug-in's ``periodic`` tasks); ``final``: once
        more at shutdown. A failing pass is logged, the next one runs."""
        self._background.append((task, interval_s, final))
        if self._serving:
            self._tasks.append(asyncio.get_running_loop().create_task(self._every(task, interval_s)))

    async def _every(self, task: Callable[[], Awaitable[Any]], interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await task()
            except Exception:  # noqa: BLE001 - a periodic pass must not end the gateway
                log.warning("periodic task %s failed; it runs again in %.1f s", getattr(task, "__qualname__", task),
                            interval_s, exc_info=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        self.recorder.start()
        await self.pool.start()
        loop = asyncio.get_running_loop()
        self._serving = True
        self._tasks = [loop.create_task(self._every(t, s)) for t, s, _ in self._background]
        try:
            yield
        finally:
            self._serving = False
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for task, _, final in self._background:
                if final:
                    with contextlib.suppress(Exception):
                        await task()
            await self.pool.close()
            await asyncio.to_thread(self.recorder.stop)

    def _build_app(self) -> Starlette:
        admin = self.admin
        r = admin.route
        routes = [
            *call_routes(self.calls.handle),  # the model calls: see CallLane (they rarely get this far)
            # each under the rollout's URL with and without /v1, as the model calls (call_lane.PATHS)
            Route("/r/{rollout}/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/r/{rollout}/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/r/{rollout}/v1/models", self._models, methods=["GET"]),
            Route("/r/{rollout}/models", self._models, methods=["GET"]),
            *self._gemini_routes(),
            Route("/r/{rollout}/reward", self._reward, methods=["POST"]),
            WebSocketRoute("/r/{rollout}/{rest:path}", self._websocket),  # matches WebSocket handshakes only
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/healthz", self._healthz, methods=["GET"]),
            Route("/metrics", self._metrics, methods=["GET"]),
            Route("/admin/rollouts", r(admin.create_rollout), methods=["POST"]),
            Route("/admin/rollouts", r(admin.list_rollouts), methods=["GET"]),
            Route("/admin/rollouts/{rollout}", r(admin.get_rollout), methods=["GET"]),
            Route("/admin/rollouts/{rollout}/status", r(admin.set_status), methods=["POST"]),
            Route("/admin/rollouts/{rollout}/closed", r(admin.closed), methods=["POST"]),
            Route("/admin/pause", r(admin.pause), methods=["POST"]),
            Route("/admin/resume", r(admin.resume), methods=["POST"]),
            Route("/admin/policy_version", r(admin.policy_version), methods=["POST"]),
            Route("/admin/status", r(admin.status), methods=["GET"]),
        ]
        for plugin in self.plugins:
            routes += plugin.routes()
        handlers = {404: self._unknown_route, 405: self._unknown_route}  # JSON in the API's shape; logged
        return Starlette(routes=routes, lifespan=self.lifespan, exception_handlers=handlers)

    def _gemini_routes(self) -> list[Route]:
        """Google's Gemini API under a rollout: ``v1beta`` (what its clients call), ``v1`` and no version (a
        client handed a base URL naming one); the model list under ``v1beta`` (``/v1/models`` and ``/models``
        are OpenAI's, and answer Google's clients in their shape). ``.../models/<model>`` without an action
        is also OpenAI's model retrieval."""
        routes = [Route("/r/{rollout}/v1beta/models", self._models, methods=["GET"])]
        for version in ("v1beta/", "v1/", ""):
            base = f"/r/{{rollout}}/{version}models/{{model}}"
            routes += [Route(f"{base}:countTokens", self._gemini_count_tokens, methods=["POST"]),
                       # after the actions (call_routes, first), which it would match too: one model, or
                       # an action not served
                       Route(base, self._model, methods=["GET", "POST"])]
        return routes

    def mount(self, path: str, app: Any) -> None:
        """Serve another ASGI app under ``path`` (before serving starts): how a composing layer adds the
        dashboard (``harnessrl.ui.mount_dashboard``) without the gateway knowing it."""
        self.routes.router.routes.append(Mount(path, app=app))

    # -- harness routes -------------------------------------------------------------------------------
    async def _count_tokens(self, request: Request) -> Response:
        """Anthropic's token counting (Claude Code sizes its context with it): not a sampled call."""
        try:
            state = await self.registry.authorize(request.path_params["rollout"], api_key(request))
            body = await read_json(request, self.config.limits.max_body_bytes)
            t = self.calls.translate(state, ApiKind.ANTHROPIC_MESSAGES, body, request)
        except GatewayError as exc:
            return error_response(exc, ApiKind.ANTHROPIC_MESSAGES)
        return json_response({"input_tokens": await self.calls.count_tokens(state, t.chat)})

    async def _model(self, request: Request) -> Response:
        """``GET .../models/<model>``; any other request here (``POST ...:embedContent``) is an unknown route."""
        if request.method != "GET" or ":" in request.path_params["model"]:
            raise HTTPException(404)
        return await self._models(request)

    async def _gemini_count_tokens(self, request: Request) -> Response:
        """Gemini's countTokens (its CLI sizes its context with it): not a sampled call, not recorded."""
        try:
            state = await self.registry.authorize(request.path_params["rollout"], api_key(request))
            body = await read_json(request, self.config.limits.max_body_bytes)
            t = gemini.count_request(body, request.path_params["model"], self.config.images == "pass")
        except GatewayError as exc:
            return error_response(exc, ApiKind.GEMINI)
        return json_response({"totalTokens": await self.calls.count_tokens(state, t.chat)})

    async def _unknown_route(self, request: Request, exc: Exception) -> Response:
        """Routing's 404/405, answered in the request's API shape; under an authorized rollout's base URL it
        is recorded on the rollout as a refused call under the API its path names (a harness on the wrong
        path can see why it failed)."""
        t0 = time.perf_counter()
        refusal, kind = route_refusal(request, exc)
        rid = rollout_of(request.url.path)
        state = None
        if rid is not None:
            with contextlib.suppress(GatewayError):
                state = await self.registry.authorize(rid, api_key(request))
        if state is None:
            log_unknown_route(request, refusal, kind)
        else:
            await self.calls.record_refused(request, api_of(request), state, None, refusal, t0)
        return unknown_route_response(refusal, kind, exc)

    async def _websocket(self, websocket: WebSocket) -> None:
        """A WebSocket handshake under a rollout (Codex's Responses transport): refused before it is
        accepted, answered and recorded as an unknown route is (426 on the Responses path: see
        ``refusals.websocket_refusal``). Without the server's denial-response extension it is closed (403)."""
        request = Request({**websocket.scope, "type": "http", "method": "GET"})  # the handshake, as HTTP
        response = await self._unknown_route(request, HTTPException(404))
        if "websocket.http.response" in websocket.scope.get("extensions", {}):
            await websocket.send_denial_response(response)
        else:
            await websocket.close()

    async def _models(self, request: Request) -> Response:
        """The served policy's name: OpenAI's list, or Google's (a ``v1beta`` path or a Google client)."""
        google = family(request) == "google" or "key" in request.query_params
        if "rollout" in request.path_params:
            try:
                await self.registry.authorize(request.path_params["rollout"], api_key(request))
            except RolloutClosedError:
                pass  # listing models of a finished rollout is harmless
            except GatewayError as exc:
                return error_response(exc, ApiKind.GEMINI) if google else exc.response()
        if google:
            return self.gemini_models_response(request.path_params.get("model"))
        if "model" in request.path_params:  # OpenAI's model retrieval: any name is served by the policy
            return json_response({"id": request.path_params["model"], "object": "model", "created": 0,
                                  "owned_by": "harnessrl"})
        return self.models_response()

    def gemini_models_response(self, model: str | None) -> Response:
        """Google's model list, or one model: any name asked for is served by the policy."""
        version, limit = self.gate.policy_version, self.config.limits.max_tokens_per_call
        if model is not None:
            return json_response(gemini.model_info(model, self.config.model_name, version, limit))
        return json_response({"models": [gemini.model_info(self.config.model_name, self.config.model_name,
                                                           version, limit)]})

    def models_response(self) -> Response:
        model = {"id": self.config.model_name, "object": "model", "created": 0, "owned_by": "harnessrl",
                 "policy_version": self.gate.policy_version}
        return json_response({"object": "list", "data": [model]})

    async def _reward(self, request: Request) -> Response:
        rid = request.path_params["rollout"]
        try:
            try:
                await self.registry.authorize(rid, api_key(request))
            except RolloutClosedError:
                pass  # a harness may report its reward just after the runner saw it exit
            body = await read_json(request, 1024 * 1024)
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            value, name, idx = body.get("value"), body.get("name", "reward"), body.get("call_index")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadRequest("'value' is required and must be a number")
            if not isinstance(name, str) or not name:
                raise BadRequest("'name' must be a non-empty string")
            if name in SCORING_NAMES:  # harnessrl's scoring writes these; a harness may not forge them
                raise BadRequest(f"reward name {name!r} is reserved for harnessrl's scoring "
                                 f"({', '.join(sorted(SCORING_NAMES))}); post under another name, e.g. 'reward'")
            if idx is not None and (type(idx) is not int or idx < 0):
                raise BadRequest("'call_index' must be a non-negative integer")
            try:
                reward = await asyncio.to_thread(self.store.add_reward, rid, float(value), name, idx)
            except RolloutClosed as exc:
                raise RolloutClosedError(str(exc)) from None
        except GatewayError as exc:
            return exc.response()
        return json_response({"rollout_id": rid, "name": reward.name, "value": reward.value,
                              "call_index": reward.call_index}, 201)

    async def _healthz(self, request: Request) -> Response:
        healthy = any(e.healthy for e in self.pool.engines)
        return json_response({"ok": healthy, "paused": self.gate.paused,
                              "policy_version": self.gate.policy_version}, 200 if healthy else 503)


    async def _metrics(self, request: Request) -> Response:
        """Prometheus text format: enough to watch a run (calls, commits, queueing, engines)."""
        gate, rec = self.gate, self.recorder
        lines = [
            f"harnessrl_calls_recorded_total {rec.recorded}",
            f"harnessrl_store_commits_total {rec.batches}",
            f"harnessrl_store_commits_on_loop_total {rec.batches_on_loop}",
            f"harnessrl_requests_in_flight {gate.in_flight}",
            f"harnessrl_requests_waiting_on_pause {gate.waiting}",
            f"harnessrl_paused {int(gate.paused)}",
            f"harnessrl_policy_version {gate.policy_version}",
        ]
        for plugin in self.plugins:
            lines += plugin.metrics_lines()
        if self.router is not None:
            lines += [f'harnessrl_policy_version{{policy="{name}"}} {v}' for name, v in self.router.versions.items()]
        for e in self.pool.engines:
            label = f'{{engine="{e.id}"}}'
            lines += [f"harnessrl_engine_healthy{label} {int(e.healthy)}",
                      f"harnessrl_engine_outstanding{label} {e.outstanding}",
                      f"harnessrl_engine_served_total{label} {e.served}"]
        return Response("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


class _Host:
    """The ``PluginHost`` of a gateway: what a plug-in may use of it, and nothing more."""

    def __init__(self, gw: Gateway) -> None:
        self._gw = gw
        self.store: Store = gw.store
        self.limits: GatewayLimits = gw.config.limits
        self.engines: list[str] = gw.config.engines
        self.registry: RolloutRegistry = gw.registry
        self.images: bool = gw.config.images == "pass"

    def policy_version(self) -> int:
        return self._gw.gate.policy_version

    def forget_affinity(self, rollout_id: str) -> None:
        self._gw.pool.forget(rollout_id)

    async def serve(self, request: Request, api: ApiKind, state: RolloutState, body: Any, t0: float) -> Any:
        return await self._gw.calls.serve(request, api, state, body, t0)

    def translate(self, state: RolloutState, api: ApiKind, body: Any, request: Request) -> Translation:
        return self._gw.calls.translate(state, api, body, request)

    async def count_tokens(self, state: RolloutState, chat_body: dict) -> int:
        return await self._gw.calls.count_tokens(state, chat_body)

    def models_response(self) -> Response:
        return self._gw.models_response()

    def public_url(self, request: Request) -> str:
        return self._gw.public_url(request)

    def admin_route(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        return self._gw.admin.route(handler)  # type: ignore[no-any-return]


def _router(config: GatewayConfig) -> Any:
    """Several policies: the router of calls to them (None: one policy, as before)."""
    if not config.policies:
        return None
    from harnessrl.policies.routing import Router

    return Router(config.routing, config.policies)


#: uvicorn's settings for the gateway (``GatewayServer``, ``harnessrl gateway``). ``proxy_headers`` off: the
#: gateway wraps Starlette's routes in uvicorn's ``ProxyHeadersMiddleware`` itself (the admin API's
#: ``base_url`` behind a same-host TLS proxy), leaving out the model-call lane, which reads neither the client's
#: address nor the scheme (the middleware was ~2% of a call's CPU).
SERVE_OPTIONS: dict[str, Any] = {"access_log": False, "timeout_keep_alive": 60, "backlog": 4096,
                                 "proxy_headers": False}


def _forwarded_allow_ips() -> str:
    """The proxies whose X-Forwarded-* headers are trusted: uvicorn's default (its ``--forwarded-allow-ips``)."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


class GatewayServer:
    """Runs a ``Gateway`` under uvicorn in a background thread (in-process controller, tests).

    >>> server = GatewayServer(Gateway(store, GatewayConfig(engines=[url], port=0))).start()
    >>> server.url  # 'http://127.0.0.1:54321'
    >>> server.stop()
    """

    def __init__(self, gateway: Gateway, log_level: str = "warning") -> None:
        import uvicorn

        self.gateway = gateway
        cfg = gateway.config
        self._sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((cfg.host, cfg.port))
        host, port = self._sock.getsockname()[:2]
        self.url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
        gateway.url = self.url
        self._server = uvicorn.Server(uvicorn.Config(gateway.app, log_level=log_level, lifespan="on",
                                                     **SERVE_OPTIONS))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="harnessrl-gateway", daemon=True)

    def start(self, timeout_s: float = 30.0) -> GatewayServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start; see the log for the cause")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> GatewayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(store: Store, engines: list[str], config: GatewayConfig | None = None,
                    renderer: ChatRenderer | None = None, **overrides: Any) -> GatewayServer:
    """Start a gateway over ``store`` and ``engines`` in a background thread; returns the running server.

    ``server.url`` is its base URL, ``server.gateway.admin_token`` its admin token; call ``stop()``.
    ``renderer``: the token-exact renderer to use in render_mode "gateway" (default: built from
    ``config.render``), e.g. one built on the embedded engine's own tokenizer.
    """
    config = (config or GatewayConfig(port=0)).model_copy(update={"engines": list(engines), **overrides})
    return GatewayServer(Gateway(store, config, renderer=renderer)).start()
