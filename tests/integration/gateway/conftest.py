"""Fixtures: a real fake engine over HTTP, a real SQLite store on disk, the gateway on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402


@dataclass
class Rollout:
    id: str
    api_key: str
    base_url: str


class Harness:
    """Test handle on a running gateway: admin calls and rollout creation."""

    def __init__(self, server: GatewayServer, store: Store, engines: list[EngineServer]) -> None:
        self.server = server
        self.gateway = server.gateway
        self.store = store
        self.engines = engines
        self.url = server.url
        self.admin = httpx.Client(base_url=self.url, timeout=30,
                                  headers={"Authorization": f"Bearer {server.gateway.admin_token}"})

    @property
    def engine(self) -> FakeEngine:
        return self.engines[0].engine

    def rollout(self, task_id: str = "t1", group_id: str = "g1", **extra: object) -> Rollout:
        r = self.admin.post("/admin/rollouts", json={"task_id": task_id, "group_id": group_id,
                                                     "input": {"q": "hi"}, **extra})
        assert r.status_code == 201, r.text
        d = r.json()
        return Rollout(d["rollout_id"], d["api_key"], d["base_url"])

    def close(self) -> None:
        self.admin.close()


def start_gateway(store: Store, engines: list[EngineServer], **config: object) -> GatewayServer:
    cfg = GatewayConfig(port=0, engines=[e.url for e in engines], admin_token="admin-secret",
                        health_interval_s=0.2, **config)
    return GatewayServer(Gateway(store, cfg)).start()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    yield s
    s.close()


@pytest.fixture
def engine_server() -> Iterator[EngineServer]:
    srv = EngineServer(FakeEngine()).start()
    yield srv
    srv.stop()


@pytest.fixture
def make_gateway(store: Store, engine_server: EngineServer) -> Iterator:
    started: list[tuple[GatewayServer, Harness]] = []

    def make(engines: list[EngineServer] | None = None, **config: object) -> Harness:
        engines = engines if engines is not None else [engine_server]
        server = start_gateway(store, engines, **config)
        h = Harness(server, store, engines)
        started.append((server, h))
        return h

    yield make
    for server, h in started:
        h.close()
        server.stop()


@pytest.fixture
def gw(make_gateway) -> Harness:
    return make_gateway()
