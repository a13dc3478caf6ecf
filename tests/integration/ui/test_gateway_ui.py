"""The dashboard as the gateway serves it (``/ui``, behind the admin token), over calls a real gateway
recorded from a fake vLLM-dialect engine: login flow, cookie, no token in logs, and a browser walk."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402
from harnessrl.ui import mount_dashboard  # noqa: E402
from harnessrl.ui.auth import COOKIE  # noqa: E402

from .browser import browser_page, needs_browser, shot  # noqa: E402

TOKEN = "admin-secret-for-ui-tests"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, Store, str]]:
    """A gateway over a fake engine with one rollout of two chat calls; yields (url, store, rollout id)."""
    store = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    engine = EngineServer(FakeEngine()).start()
    gw = Gateway(store, GatewayConfig(port=0, engines=[engine.url], admin_token=TOKEN, health_interval_s=0.2))
    server = GatewayServer(mount_dashboard(gw)).start()  # the dashboard at /ui, as harnessrl gateway serves it
    try:
        admin = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=server.url, timeout=30) as c:
            made = c.post("/admin/rollouts", headers=admin,
                          json={"task_id": "t1", "group_id": "g1", "input": {"q": "<b>hi</b>"}}).json()
            rid, key = made["rollout_id"], made["api_key"]
            messages = [{"role": "user", "content": "say <script>hi</script>"}]
            for _ in range(2):
                r = c.post(f"/r/{rid}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                           json={"model": "m", "messages": messages})
                assert r.status_code == 200, r.text
                messages += [r.json()["choices"][0]["message"], {"role": "user", "content": "more"}]
            c.post(f"/r/{rid}/reward", headers={"Authorization": f"Bearer {key}"}, json={"value": 0.5})
        yield server.url, store, rid
    finally:
        server.stop()
        engine.stop()
        store.close()


def test_ui_needs_the_admin_token_then_a_cookie(gateway: tuple[str, Store, str],
                                                caplog: pytest.LogCaptureFixture) -> None:
    url, store, rid = gateway
    caplog.set_level(logging.DEBUG)
    with httpx.Client(base_url=url, timeout=30) as c:
        r = c.get(f"/ui/rollouts/{rid}")
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login?next=")
        assert c.get("/ui/rollouts", params={"token": "wrong"}).headers["location"].startswith("/ui/login")
        assert c.get(f"/ui/rollouts/{rid}", headers={"Authorization": "Bearer wrong"}).status_code == 303
        r = c.get(f"/ui/rollouts/{rid}", params={"token": TOKEN, "x": "1"})
        assert r.status_code == 303 and r.headers["location"] == f"/ui/rollouts/{rid}?x=1"  # token dropped
        cookie = r.cookies[COOKIE]
        assert TOKEN not in cookie and TOKEN not in r.headers["set-cookie"]
        page = c.get(f"/ui/rollouts/{rid}", cookies={COOKIE: cookie})
        assert page.status_code == 200 and '<tr data-call="1">' in page.text
        assert "&lt;b&gt;hi&lt;/b&gt;" in page.text
        assert c.get("/ui/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/ui/static/ui.css").status_code == 200  # assets carry no data
        # the login form: a wrong token says so; a right one sets the cookie; `next` cannot leave the site
        bad = c.post("/ui/login", data={"token": "nope", "next": "/ui/"}, follow_redirects=True)
        assert bad.status_code == 200 and 'id="login-failed"' in bad.text
        ok = c.post("/ui/login", data={"token": TOKEN, "next": "//evil.example/x"})
        assert ok.status_code == 303 and ok.headers["location"] == "/ui/" and COOKIE in ok.cookies
        assert c.get("/ui").status_code in (200, 303, 307)  # /ui redirects to /ui/
    server_side = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert not [m for m in server_side if TOKEN in m]  # (the test's own httpx client logs URLs)


@needs_browser
def test_browser_logs_in_and_walks_to_a_recorded_call(gateway: tuple[str, Store, str]) -> None:
    url, store, rid = gateway
    calls = store.get_calls(rid)
    with browser_page() as page:
        page.goto(f"{url}/ui/rollouts")
        page.wait_for_selector("input[name=token]")  # redirected to the login page
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#rollouts")
        assert TOKEN not in page.url
        page.click(f"a.rollout-link[href='/ui/rollouts/{rid}']")
        page.wait_for_selector("#rollout-id")
        assert page.locator("#calls tbody tr").count() == len(calls) == 2
        assert re.fullmatch(r"0?\.5", page.inner_text("#rewards tbody td.num")) is not None
        shot(page, "gateway-rollout")
        page.click("#calls a.call-link >> text='call 1'")
        page.wait_for_selector("#tokens")
        call = calls[1]
        ids = page.locator("#completion-tokens .tok").evaluate_all("ts => ts.map(t => Number(t.dataset.id))")
        assert ids == call.completion_token_ids
        assert page.locator("#prompt-tokens .tok").count() == len(call.prompt_token_ids)
        assert call.fidelity is not None and page.inner_text("#fidelity").startswith(call.fidelity.value)
        assert "say <script>hi</script>" in page.inner_text(".turn pre")
        shot(page, "gateway-call")
