"""What a viewer (``viewer_token``) sees of a call: the tokens as text; their IDs only when asked."""

from __future__ import annotations

from starlette.testclient import TestClient

from harnessrl.store import Store
from harnessrl.ui import dashboard_app

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
