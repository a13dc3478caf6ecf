"""``POST /p/{deployment}/feedback`` over real loopback HTTP: accepted signals, and each refusal's status
and message (400 body/name/value/session id, 404 unknown session, 410 closed window)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from fakes.fake_engine import EngineServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from unit.store._sessions import add_session

from harnessrl.production.config import FeedbackConfig
from harnessrl.production.feedback import post_feedback
from harnessrl.store import Store


def serve(store: Store, config: FeedbackConfig) -> EngineServer:
    async def feedback(request: Request) -> Response:
        return await post_feedback(request, store, request.path_params["deployment"], config)

    return EngineServer(Starlette(routes=[Route("/p/{deployment}/feedback", feedback, methods=["POST"])])).start()


@pytest.fixture
def client(store: Store) -> Iterator[tuple[httpx.Client, Store]]:
    server = serve(store, FeedbackConfig(window_s=3600))
    base = server.url.removesuffix("/v1")
    with httpx.Client(base_url=base, timeout=10) as c:
        yield c, store
    server.stop()


def test_feedback_is_recorded_and_numbered(client: tuple[httpx.Client, Store]) -> None:
    c, store = client
    add_session(store, "s-1", closes_at=time.time() + 3600)
    r = c.post("/p/support/feedback", json={"session_id": "s-1", "name": "thumbs", "value": 1})
    assert r.status_code == 201, r.text
    assert r.json() == {"session_id": "s-1", "name": "thumbs", "value": 1.0, "index": 0}
    r = c.post("/p/support/feedback", json={"session_id": "s-1", "name": "resolved", "value": 0.5})
    assert r.json()["index"] == 1
    assert [(f.name, f.value) for f in store.get_feedback("support", "s-1")] == [("thumbs", 1.0), ("resolved", 0.5)]


@pytest.mark.parametrize(("body", "fragment"), [
    ([1, 2], "JSON object"),
    ({"session_id": "s-1", "name": "thumbs"}, "finite number"),
    ({"session_id": "s-1", "name": "thumbs", "value": True}, "finite number"),
    ({"session_id": "s-1", "name": "thumbs", "value": "1"}, "finite number"),
    ({"session_id": "s-1", "name": "", "value": 1}, "'name'"),
    ({"session_id": "s-1", "name": "a b", "value": 1}, "'name'"),
    ({"session_id": "bad id/../x", "name": "thumbs", "value": 1}, "'session_id'"),
    ({"name": "thumbs", "value": 1}, "'session_id'"),
    ({"session_id": "s-1", "name": "thumbs", "value": 1, "extra": 2}, "unknown feedback fields"),
])
def test_bad_bodies_are_400_in_the_openai_shape(client: tuple[httpx.Client, Store], body: object,
                                                 fragment: str) -> None:
    c, store = client
    add_session(store, "s-1", closes_at=time.time() + 3600)
    r = c.post("/p/support/feedback", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert fragment in error["message"] and error["type"] == "invalid_request_error"
    assert store.get_feedback("support", "s-1") == []


def test_non_finite_values_and_malformed_json_are_400(client: tuple[httpx.Client, Store]) -> None:
    c, store = client
    add_session(store, "s-1", closes_at=time.time() + 3600)
    for raw in (b'{"session_id": "s-1", "name": "thumbs", "value": NaN}', b'{"session_id": "s-1", "name": "thumbs", '
                b'"value": 1e999}', b"{not json"):
        r = c.post("/p/support/feedback", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400, (raw, r.text)
    assert store.get_feedback("support", "s-1") == []


def test_unknown_session_is_404_and_closed_window_410(client: tuple[httpx.Client, Store]) -> None:
    c, store = client
    add_session(store, "late", closes_at=time.time() - 1)
    r = c.post("/p/support/feedback", json={"session_id": "nobody", "name": "thumbs", "value": 1})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    assert "X-Session-Id" in r.json()["error"]["message"]
    r = c.post("/p/other/feedback", json={"session_id": "late", "name": "thumbs", "value": 1})
    assert r.status_code == 404  # another deployment's session is not this one's
    r = c.post("/p/support/feedback", json={"session_id": "late", "name": "thumbs", "value": 1})
    assert r.status_code == 410, r.text
    message = r.json()["error"]["message"]
    assert "the feedback window of session 'late' closed at" in message and "window_s = 3600 s" in message
    assert r.json()["error"]["code"] == "feedback_window_closed"


def test_names_outside_weights_are_refused_when_weights_are_set(store: Store) -> None:
    add_session(store, "s-1", closes_at=time.time() + 3600)
    server = serve(store, FeedbackConfig(combine="weighted", weights={"thumbs": 1.0, "resolved": 2.0}))
    try:
        base = server.url.removesuffix("/v1")
        r = httpx.post(f"{base}/p/support/feedback", json={"session_id": "s-1", "name": "stars", "value": 5})
        assert r.status_code == 400 and "['resolved', 'thumbs']" in r.json()["error"]["message"]
        r = httpx.post(f"{base}/p/support/feedback", json={"session_id": "s-1", "name": "resolved", "value": 1})
        assert r.status_code == 201
    finally:
        server.stop()
