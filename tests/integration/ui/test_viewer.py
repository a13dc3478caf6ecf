"""What a viewer (``viewer_token``) sees of a call: the tokens as text; their IDs only when asked."""

from __future__ import annotations

from starlette.testclient import TestClient

from harnessrl.store import Store
from harnessrl.ui import dashboard_app, mount_dashboard

from .fixture_data import Fixture

OPERATOR, VIEWER = "operator-token", "viewer-token"


def test_viewers_see_token_ids_only_when_they_ask(store: Store, fx: Fixture, store_url: str) -> None:
    app = dashboard_app(store, token=OPERATOR, viewer_token=VIEWER, store_url=store_url, tokenizer="tiny")
    page = f"/rollouts/{fx.rich}/calls/0"
    with TestClient(app) as c:
        operator = c.get(page, headers={"Authorization": f"Bearer {OPERATOR}"}).text
        viewer = c.get(page, headers={"Authorization": f"Bearer {VIEWER}"}).text
        asked = c.get(page, params={"ids": "1"}, headers={"Authorization": f"Bearer {VIEWER}"}).text
    assert 'data-id="' in operator and 'id="ids-hidden"' not in operator
    assert 'id="tokens"' in viewer and 'data-id="' not in viewer and "prompt token " not in viewer
    assert 'id="ids-hidden"' in viewer and "Decoded with the tokenizer of <code>tiny</code>" in viewer
    assert 'data-id="' in asked and "prompt token " in asked


def test_the_gateways_viewer_token_opens_the_dashboard_only(tmp_path) -> None:  # noqa: ANN001
    import sys
    from pathlib import Path

    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable
    from fakes.fake_engine import EngineServer, FakeEngine

    from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
    from harnessrl.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    engine = EngineServer(FakeEngine()).start()
    gw = Gateway(store, GatewayConfig(port=0, engines=[engine.url], admin_token=OPERATOR, viewer_token=VIEWER,
                                      health_interval_s=0.2))
    server = GatewayServer(mount_dashboard(gw)).start()
    try:
        viewer = {"Authorization": f"Bearer {VIEWER}"}
        assert httpx.get(f"{server.url}/ui/", headers=viewer).status_code == 200
        assert httpx.get(f"{server.url}/admin/rollouts", headers=viewer).status_code == 403  # a wrong token
        operator = {"Authorization": f"Bearer {OPERATOR}"}
        assert httpx.get(f"{server.url}/admin/rollouts", headers=operator).status_code == 200
    finally:
        server.stop()
        engine.stop()
        store.close()
