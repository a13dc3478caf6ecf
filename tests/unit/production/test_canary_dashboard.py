"""The dashboard's deployments page shows which version serves which share of new sessions, the running
canary's evidence per arm and its decisions, as the store holds them."""

from __future__ import annotations

import re

from starlette.testclient import TestClient
from unit.production.test_canary import Loader, _sessions

from harnessrl.production.canary import CANARY, STABLE, Canary
from harnessrl.production.canary_weights import Weights
from harnessrl.production.config import CanaryConfig
from harnessrl.store import Store
from harnessrl.ui import dashboard_app


def _cells(html: str, table: str) -> list[list[str]]:
    body = html[html.index(f'class="{table}"'):]
    body = body[:body.index("</table>")]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
            if "<td" in row]


def _section(html: str, name: str) -> str:
    start = html.index(f'id="deployment-{name}"')
    return html[start:html.index("</section>", start)]


def test_deployments_page_shows_arms_evidence_and_decisions(store: Store) -> None:
    store.create_deployment("shop", {})
    store.create_deployment("quiet", {})
    canary = Canary(store, CanaryConfig(fraction=0.25, min_sessions=5), Loader())
    canary.start("shop", 3, Weights("/ckpt/v3"))
    _sessions(store, "shop", STABLE, 0, [1.0, 0.0])
    _sessions(store, "shop", CANARY, 3, [1.0])
    canary.evaluate("shop")  # hold: not enough sessions
    client = TestClient(dashboard_app(store))
    r = client.get("/deployments")
    assert r.status_code == 200
    shop, quiet = _section(r.text, "shop"), _section(r.text, "quiet")
    assert _cells(shop, "arms") == [["stable", "0", "(default)", "75%"], ["canary", "3", "shop-v3", "25%"]]
    assert _cells(shop, "evidence") == [["canary", "3", "1", "1", "1"], ["stable", "0", "2", "2", "0.5"]]
    decisions = _cells(shop, "decisions")
    assert [d[2] for d in decisions] == ["hold", "start"]  # newest first
    assert "waiting for 5 decided sessions per arm: stable 2, candidate 1" in decisions[0][6]
    assert _cells(quiet, "arms") == [["stable", "the gateway&#39;s", "(default)", "100%"]]
    assert "No canary decisions yet." in quiet
    assert 'href="/deployments"' in client.get("/").text  # reachable from every page's navigation
