"""The production routes: ``/p/{deployment}/v1/...`` and ``/p/{deployment}/s/{session}/v1/...``.

Production mode is a plug-in of the gateway (``gateway/plugins.py``): ``ProductionApi`` is built on the
gateway's ``PluginHost`` and adds these routes, the admin routes (``admin.py``), its periodic tasks and its
metrics. Each call is authorized by its app key (``keys.py``), finds its session (``sessions.py``) and is
then served by the gateway's ordinary call lifecycle (``PluginHost.serve``) on the session's rollout state:
the same limits, pause gate, engines, streaming, redaction and recording as a training rollout's call --
except that a session not sampled for recording stores nothing. Every answer carries the session id
(``X-Session-Id``), which the application sends back with its feedback (``POST /p/{d}/feedback``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from harnessrl.gateway.admin import json_response
from harnessrl.gateway.apis import gemini
from harnessrl.gateway.call import error_response
from harnessrl.gateway.errors import GatewayError, NotFoundError
from harnessrl.gateway.http import api_key, read_json
from harnessrl.gateway.plugins import Periodic
from harnessrl.gateway.rollout_registry import RolloutState
from harnessrl.production.admin import ProductionAdmin
from harnessrl.production.arms import ArmPlan
from harnessrl.production.canary_admin import CanaryAdmin
from harnessrl.production.config import ProductionConfig
from harnessrl.production.deployments import Deployments
from harnessrl.production.feedback import post_feedback
from harnessrl.production.keys import AppKeyAuth, OtherDeployment
from harnessrl.production.sessions import (
    NO_ROLLOUT_KEY,
    LiveSession,
    SessionTable,
    check_session_id,
    derived_session_id,
)
from harnessrl.production.windows import WindowCloser
from harnessrl.store.deployments import AppKey, Deployment
from harnessrl.types import ApiKind

if TYPE_CHECKING:
    from harnessrl.gateway.plugins import PluginHost

log = logging.getLogger(__name__)

#: How often counted calls are written to the store (and a session's feedback window moved).
FLUSH_INTERVAL_S = 0.5
_APIS = {"chat/completions": ApiKind.CHAT, "completions": ApiKind.COMPLETIONS, "responses": ApiKind.RESPONSES,
         "messages": ApiKind.ANTHROPIC_MESSAGES}


class ProductionApi:
    """Production mode of one gateway (a ``GatewayPlugin``): its deployments, app keys, sessions and routes."""

    def __init__(self, host: PluginHost, config: ProductionConfig) -> None:
        self.host, self.config = host, config
        self.store = host.store
        self.deployments = Deployments(self.store, config)
        self.deployments.ensure_configured()
        self.keys = AppKeyAuth(self.store)
        self.arms = ArmPlan(self.store, host.policy_version, config.canary, loader=_version_loader(host))
        self.sessions = SessionTable(self.store, host.registry, self.arms, config, forget=host.forget_affinity)
        self._header = config.session_header.lower().encode("latin-1")
        self.windows = WindowCloser(self.store, config.feedback, busy=self.sessions.busy)

    def periodic(self) -> list[Periodic]:
        """Batched session writes (once more at shutdown), feedback windows, canary evaluations."""
        return [Periodic(self.sessions.flush, FLUSH_INTERVAL_S, final=True),
                Periodic(self.close_windows, self.config.feedback.close_interval_s),
                Periodic(self.arms.evaluate, self.config.canary.evaluate_interval_s)]

    async def close_windows(self) -> Any:
        """Decide the sessions whose feedback window closed, after writing the calls just answered (a
        session's window is its last call + ``window_s``)."""
        await self.sessions.flush()
        return await self.windows()

    def routes(self) -> list[BaseRoute]:
        """The application routes under ``/p/``, then the admin routes (``admin.py``)."""
        routes: list[BaseRoute] = []
        for prefix in ("/p/{deployment}/v1", "/p/{deployment}/s/{session}/v1"):
            for path, api in _APIS.items():
                routes.append(Route(f"{prefix}/{path}", self._call_endpoint(api), methods=["POST"]))
            routes.append(Route(f"{prefix}/messages/count_tokens", self._count_tokens, methods=["POST"]))
            routes.append(Route(f"{prefix}/models", self._models, methods=["GET"]))
        for prefix in ("/p/{deployment}", "/p/{deployment}/s/{session}"):  # Google's Gemini API
            for version in ("v1beta", "v1"):
                base = f"{prefix}/{version}/models/{{model}}"
                routes += [Route(f"{base}:generateContent", self._call_endpoint(ApiKind.GEMINI), methods=["POST"]),
                           Route(f"{base}:streamGenerateContent", self._call_endpoint(ApiKind.GEMINI),
                                 methods=["POST"]),
                           Route(f"{base}:countTokens", self._count_tokens, methods=["POST"])]
        routes.append(Route("/p/{deployment}/feedback", self._feedback, methods=["POST"]))
        routes += ProductionAdmin(self, self.host.admin_route).routes()
        if self.arms.canary is not None:  # its admin routes only where a canary is configured
            routes += CanaryAdmin(self, self.arms.canary).routes(self.host.admin_route)
        return routes

    # -- the calls ------------------------------------------------------------------------------------
    def _call_endpoint(self, api: ApiKind) -> Any:
        async def endpoint(request: Request) -> Any:
            return await self.call(request, api)

        endpoint.__name__ = f"production_{api.value}"
        return endpoint

    async def call(self, request: Request, api: ApiKind) -> Any:
        t0 = time.perf_counter()
        try:
            key, (dep, cfg) = await self._authorize(request)
            body = await read_json(request, self.host.limits.max_body_bytes)
            sid, derived = self._session_id(request, api, body, key)
            live = await self.sessions.get(dep.name, sid, key.id, derived=derived,
                                           record_fraction=self.deployments.record_fraction(dep.name, cfg))
        except GatewayError as exc:
            return error_response(exc, api)
        live.serving += 1  # until the answer is sent: the session's window stays open meanwhile
        try:
            answer = await self.host.serve(request, api, live.state, body, t0)
        except BaseException:
            live.serving -= 1
            raise
        return _SessionAnswer(answer, self._header, live, self.sessions)

    async def _authorize(self, request: Request) -> tuple[AppKey, Any]:
        """The app key and the deployment of a request. The key is checked first (cached), so a caller
        without a good key learns nothing about which deployments exist."""
        name = request.path_params["deployment"]
        try:
            key = await self.keys.authorize(name, api_key(request))
        except OtherDeployment:
            await self.deployment_or_404(name)
            raise
        found = await self.deployments.get(name)
        assert found is not None  # a key of this deployment exists, so the deployment does
        return key, found

    def _session_id(self, request: Request, api: ApiKind, body: Any, key: AppKey) -> tuple[str, bool]:
        """The call's session id and whether the gateway derived it (path, else header, else digest)."""
        if "session" in request.path_params:
            return check_session_id(request.path_params["session"], "the URL path (/s/<session>/v1)"), False
        named = request.headers.get(self.config.session_header)
        if named is not None:
            return check_session_id(named, f"the {self.config.session_header} header"), False
        return derived_session_id(api, body, key.id), True

    async def _count_tokens(self, request: Request) -> Response:
        """Anthropic's or Gemini's token counting: not a sampled call, so no session is opened for it."""
        google = "model" in request.path_params
        api = ApiKind.GEMINI if google else ApiKind.ANTHROPIC_MESSAGES
        try:
            await self._authorize(request)
            body = await read_json(request, self.host.limits.max_body_bytes)
            state = RolloutState(id="count-tokens", key_hash=NO_ROLLOUT_KEY, record=False)
            t = gemini.count_request(body, request.path_params["model"], self.host.images) if google else \
                self.host.translate(state, api, body, request)
        except GatewayError as exc:
            return error_response(exc, api)
        count = await self.host.count_tokens(state, t.chat)
        return json_response({"totalTokens": count} if google else {"input_tokens": count})

    async def _models(self, request: Request) -> Response:
        try:
            await self._authorize(request)
        except GatewayError as exc:
            return exc.response()
        return self.host.models_response()

    async def _feedback(self, request: Request) -> Response:
        try:
            _, (dep, _) = await self._authorize(request)
        except GatewayError as exc:
            return exc.response()
        await self.sessions.flush()  # the session's newest calls set its window
        return await post_feedback(request, self.store, dep.name, self.config.feedback)

    # -- what the admin API and metrics read ----------------------------------------------------------
    def deployment_json(self, dep: Deployment, request: Request) -> dict[str, Any]:
        base = f"{self.host.public_url(request)}/p/{dep.name}"
        return {"name": dep.name, "run_id": dep.run_id, "config": dep.config, "created_at": dep.created_at,
                "base_url": f"{base}/v1", "anthropic_base_url": base}

    def metrics_lines(self) -> list[str]:
        return [f"harnessrl_production_sessions_opened_total {self.sessions.opened}",
                f"harnessrl_production_sessions_recorded_total {self.sessions.recorded}",
                *self.arms.metric_lines()]

    async def deployment_or_404(self, name: str) -> Deployment:
        found = await self.deployments.get(name)
        if found is None:
            raise NotFoundError(f"unknown deployment {name!r}; create it with POST /admin/deployments",
                                code="deployment_not_found")
        return found[0]


class _SessionAnswer:
    """A call's answer with its session id in a header; counted toward the session when it is answered."""

    def __init__(self, app: Any, header: bytes, live: LiveSession, sessions: SessionTable) -> None:
        self.app, self.header, self.live, self.sessions = app, header, live, sessions

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        value = self.live.id.encode()

        async def send_with_session(message: Any) -> None:
            if message["type"] == "http.response.start":
                if message["status"] < 400:  # before the app can see the answer, so before it asks again
                    self.sessions.touch(self.live)
                message = {**message, "headers": [*message.get("headers", ()), (self.header, value)]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_session)
        finally:
            self.live.serving -= 1


def _version_loader(host: PluginHost) -> Any:
    """How canary candidates reach the engines: hot-loaded LoRA adapters over HTTP (vLLM, or the embedded
    engine's server). An in-process embedded engine may set ``arms.canary.loader = EmbeddedVersions(engine)``."""
    from harnessrl.production.canary_weights import LoraEngines

    return LoraEngines(host.engines)
