"""Fixtures for the client matrix: a fake vLLM-dialect engine, a SQLite store and the gateway, on loopback.

One gateway per test module (starting servers is the slow part); each test opens its own rollout. The
fake engine answers a request that offers tools (and does not end in a tool result) with a call of the
first tool, arguments ``{"n": <int>}``, and anything else with text: a tool-using agent therefore runs
exactly two turns, which is what every test here checks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

# Offline switches, set before any client library is imported: litellm fetches a cost map from the
# internet at import, the Agents SDK posts traces to a fixed internet address.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402


@dataclass
class RolloutHandle:
    id: str
    api_key: str
    base_url: str  # OPENAI_BASE_URL: .../r/<id>/v1
    anthropic_base_url: str  # ANTHROPIC_BASE_URL: .../r/<id> (the client appends /v1/messages)


class Stack:
    """The running engine, gateway and store, plus rollout creation through the admin API."""

    def __init__(self, store: Store, engine: EngineServer, server: GatewayServer) -> None:
        self.store, self.engine_server, self.server = store, engine, server
        self.admin = httpx.Client(base_url=server.url, timeout=30,
                                  headers={"Authorization": f"Bearer {server.gateway.admin_token}"})

    @property
    def engine(self) -> FakeEngine:
        return self.engine_server.engine

    def rollout(self, task_id: str = "client-task") -> RolloutHandle:
        r = self.admin.post("/admin/rollouts", json={"task_id": task_id, "group_id": task_id, "input": {}})
        assert r.status_code == 201, r.text
        d = r.json()
        return RolloutHandle(d["rollout_id"], d["api_key"], d["base_url"], d["anthropic_base_url"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('clients') / 'store.db'}")
    engine = EngineServer(FakeEngine()).start()
    cfg = GatewayConfig(port=0, engines=[engine.url], admin_token="admin-secret", health_interval_s=0.2)
    server = GatewayServer(Gateway(store, cfg)).start()
    s = Stack(store, engine, server)
    yield s
    s.admin.close()
    server.stop()
    engine.stop()
    store.close()
