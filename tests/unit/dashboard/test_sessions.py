"""Dashboard access: operator and viewer tokens, sessions that expire and can be revoked (real HTTP)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from harnessrl.store import open_store
from harnessrl.ui import dashboard_app
from harnessrl.ui.auth import COOKIE, Sessions

OPERATOR, VIEWER = "operator-token-1", "viewer-token-2"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, object]]:
    """The dashboard behind both tokens on a loopback port; yields (url, its TokenGate)."""
    store = open_store(f"sqlite:///{tmp_path / 'ui.db'}")
    gate = dashboard_app(store, token=OPERATOR, viewer_token=VIEWER, session_ttl_s=3600, tokenizer="none")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(gate, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}", gate
    server.should_exit = True
    thread.join(5)
    store.close()


def _login(url: str, token: str) -> str:
    r = httpx.get(f"{url}/", params={"token": token})
    assert r.status_code == 303 and token not in r.headers["set-cookie"]
    assert "max-age=3600" in r.headers["set-cookie"].lower()
    return r.cookies[COOKIE]


def test_both_tokens_open_a_session_and_a_wrong_one_does_not(served: tuple[str, object]) -> None:
    url, gate = served
    assert httpx.get(f"{url}/").headers["location"].startswith("/login")
    assert httpx.get(f"{url}/", params={"token": "nope"}).headers["location"].startswith("/login")
    for token, role in ((OPERATOR, "operator"), (VIEWER, "viewer")):
        cookie = _login(url, token)
        assert httpx.get(f"{url}/", cookies={COOKIE: cookie}).status_code == 200
        assert gate.sessions.role(cookie) == role
        assert httpx.get(f"{url}/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert httpx.get(f"{url}/", cookies={COOKIE: "forged"}).status_code == 303


def test_logout_and_operator_revocation_end_sessions(served: tuple[str, object]) -> None:
    url, gate = served
    viewer, other_viewer, operator = _login(url, VIEWER), _login(url, VIEWER), _login(url, OPERATOR)
    out = httpx.get(f"{url}/logout", cookies={COOKIE: viewer})
    assert out.status_code == 303 and httpx.get(f"{url}/", cookies={COOKIE: viewer}).status_code == 303
    # a viewer cannot revoke; an operator revokes every session, their own included
    denied = httpx.post(f"{url}/sessions/revoke", cookies={COOKIE: other_viewer})
    assert denied.status_code == 403 and "operator" in denied.json()["error"]["message"]
    done = httpx.post(f"{url}/sessions/revoke", cookies={COOKIE: operator})
    assert done.status_code == 200 and done.json() == {"revoked": 2}
    for cookie in (other_viewer, operator):
        assert httpx.get(f"{url}/", cookies={COOKIE: cookie}).status_code == 303
    assert len(gate.sessions) == 0


def test_sessions_expire() -> None:
    now = [1000.0]
    sessions = Sessions(ttl_s=60, clock=lambda: now[0])
    sid = sessions.open("viewer")
    assert sessions.role(sid) == "viewer" and sid not in repr(sessions._by_digest)  # only its hash is kept
    now[0] += 59
    assert sessions.role(sid) == "viewer"
    now[0] += 2
    assert sessions.role(sid) is None and len(sessions) == 0


def test_tokens_must_differ_and_a_viewer_needs_an_operator(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'ui.db'}")
    with pytest.raises(ValueError, match="must differ"):
        dashboard_app(store, token="same", viewer_token="same", tokenizer="none")
    with pytest.raises(ValueError, match="operator token"):
        dashboard_app(store, viewer_token="v", tokenizer="none")
    store.close()


def test_ui_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSRL_UI_")}
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "ui", "--host", "0.0.0.0", "--port", "1",
                          "--db", f"sqlite:///{tmp_path / 'ui.db'}"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode != 0 and "refusing to serve the dashboard on 0.0.0.0 without a token" in out.stderr
    assert not (tmp_path / "ui.db").exists()  # refused before anything was opened
