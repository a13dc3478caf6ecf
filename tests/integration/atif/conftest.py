"""A gateway on loopback in front of the fake engine, recording into a SQLite store: the real recording path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Store, GatewayServer]]:
    store = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    engine = EngineServer(FakeEngine()).start()
    server = GatewayServer(Gateway(store, GatewayConfig(port=0, engines=[engine.url], admin_token="admin-secret",
                                                        health_interval_s=0.2))).start()
    yield store, server
    server.stop()
    engine.stop()
    store.close()
