"""Fixtures: a production-mode gateway on loopback in front of a real fake engine, over a real store
(SQLite on disk; PostgreSQL too where ``HARNESSRL_TEST_POSTGRES_URL`` names a server)."""

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
from harnessrl.production.config import ProductionConfig  # noqa: E402
from harnessrl.production.plugin import production_plugin  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402

ADMIN = "admin-secret"


@dataclass
class AppKey:
    id: str
    key: str
    base_url: str
    anthropic_base_url: str


class Production:
    """Test handle on a running production gateway: admin calls, deployments, keys."""

    def __init__(self, server: GatewayServer, store: Store) -> None:
        self.server, self.store = server, store
        self.gateway = server.gateway
        self.url = server.url
        self.admin = httpx.Client(base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {ADMIN}"})

    def deployment(self, name: str, **settings: object) -> dict:
        r = self.admin.post("/admin/deployments", json={"name": name, **settings})
        assert r.status_code == 201, r.text
        return r.json()

    def key(self, deployment: str, label: str = "test") -> AppKey:
        r = self.admin.post(f"/admin/deployments/{deployment}/keys", json={"label": label})
        assert r.status_code == 201, r.text
        d = r.json()
        return AppKey(d["id"], d["api_key"], d["base_url"], d["anthropic_base_url"])

    def sessions(self, deployment: str, **query: object) -> list[dict]:
        r = self.admin.get(f"/admin/deployments/{deployment}/sessions", params={"limit": 1000, **query})
        assert r.status_code == 200, r.text
        return r.json()["data"]

    def close(self) -> None:
        self.admin.close()


def _store_urls() -> list[str]:
    return ["sqlite", "postgresql"]


@pytest.fixture(params=_store_urls())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s = open_store(f"sqlite:///{tmp_path / 'prod.db'}")
        yield s
        s.close()
        return
    s = open_store(request.getfixturevalue("pg_url"))  # a fresh schema, dropped after this store closes
    yield s
    s.close()


@pytest.fixture
def engine_server() -> Iterator[EngineServer]:
    srv = EngineServer(FakeEngine()).start()
    yield srv
    srv.stop()


@pytest.fixture
def make_production(store: Store, engine_server: EngineServer) -> Iterator:
    started: list[tuple[GatewayServer, Production]] = []

    def make(production: ProductionConfig | None = None, **config: object) -> Production:
        cfg = GatewayConfig(port=0, engines=[engine_server.url], admin_token=ADMIN, health_interval_s=0.2,
                            mode="production", **config)
        server = GatewayServer(Gateway(store, cfg, plugins=[production_plugin(production)])).start()
        handle = Production(server, store)
        started.append((server, handle))
        return handle

    yield make
    for server, handle in started:
        handle.close()
        server.stop()


@pytest.fixture
def production(make_production) -> Production:  # noqa: ANN001
    return make_production()
