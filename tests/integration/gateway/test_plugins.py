"""A feature plugs into the gateway through ``gateway/plugins.py`` alone: its routes are served, its
periodic tasks run while serving (a ``final`` one once more at shutdown), its metrics lines are in
``/metrics``, and it serves and records a call on a rollout state through the ``PluginHost``."""

from __future__ import annotations

import time

import httpx
from fakes.fake_engine import EngineServer
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.gateway.admin import json_response
from harnessrl.gateway.plugins import Periodic, PluginHost
from harnessrl.gateway.rollout_registry import hash_key
from harnessrl.store import Store
from harnessrl.types import ApiKind

ADMIN = "admin-secret"


class Echo:
    """A plug-in: ``/echo/v1/chat/completions`` serves a call on one rollout; ``/admin/echo`` behind the
    admin token; a periodic task and a final one counted."""

    def __init__(self, host: PluginHost, rollout_id: str) -> None:
        self.host, self.rollout_id = host, rollout_id
        self.ticks = 0
        self.finals = 0

    def routes(self) -> list[BaseRoute]:
        return [Route("/echo/v1/chat/completions", self._call, methods=["POST"]),
                Route("/admin/echo", self.host.admin_route(self._admin), methods=["GET"])]

    def periodic(self) -> list[Periodic]:
        return [Periodic(self._tick, 0.05), Periodic(self._final, 3600, final=True)]

    def metrics_lines(self) -> list[str]:
        return [f"echo_ticks_total {self.ticks}"]

    async def _tick(self) -> None:
        self.ticks += 1

    async def _final(self) -> None:
        self.finals += 1

    async def _call(self, request: Request) -> object:
        state = await self.host.registry.load(self.rollout_id)
        return await self.host.serve(request, ApiKind.CHAT, state, await request.json(), time.perf_counter())

    async def _admin(self, request: Request) -> Response:
        return json_response({"policy_version": self.host.policy_version(), "limit": self.host.limits.max_calls_per_rollout})


def test_a_plugin_adds_routes_tasks_and_metrics(store: Store, engine_server: EngineServer) -> None:
    rollout = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash=hash_key("unused"))
    plugins: list[Echo] = []

    def make(host: PluginHost) -> Echo:
        plugins.append(Echo(host, rollout.id))
        return plugins[-1]

    cfg = GatewayConfig(port=0, engines=[engine_server.url], admin_token=ADMIN, health_interval_s=0.2)
    server = GatewayServer(Gateway(store, cfg, plugins=[make])).start()
    try:
        (echo,) = plugins
        r = httpx.post(f"{server.url}/echo/v1/chat/completions", timeout=30,
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert r.status_code == 200, r.text
        assert len(store.get_calls(rollout.id)) == 1  # served and recorded by the gateway's call lifecycle
        assert httpx.get(f"{server.url}/admin/echo").status_code == 401  # behind the admin token
        r = httpx.get(f"{server.url}/admin/echo", headers={"Authorization": f"Bearer {ADMIN}"})
        assert r.json() == {"policy_version": 0, "limit": cfg.limits.max_calls_per_rollout}
        deadline = time.monotonic() + 10
        while echo.ticks < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert echo.ticks >= 2 and echo.finals == 0
        assert "echo_ticks_total" in httpx.get(f"{server.url}/metrics").text
    finally:
        server.stop()
    assert echo.finals == 1  # once more at shutdown


def test_without_the_plugin_its_routes_and_metrics_are_absent(store: Store, engine_server: EngineServer) -> None:
    cfg = GatewayConfig(port=0, engines=[engine_server.url], admin_token=ADMIN)
    server = GatewayServer(Gateway(store, cfg)).start()
    try:
        assert httpx.post(f"{server.url}/echo/v1/chat/completions", json={}).status_code == 404
        assert "echo_" not in httpx.get(f"{server.url}/metrics").text
    finally:
        server.stop()
