"""The model-call lane (``gateway/call_lane.py``) routes exactly the calls Starlette's router routes to a call
handler, with the same path parameters; everything else still reaches Starlette; a handler that raises is
answered 500 by the server and the gateway goes on serving."""

from __future__ import annotations

import functools

import httpx
import pytest
from starlette.routing import Match

from harnessrl.gateway.call_lane import GEMINI_ACTIONS, PATHS, match

ROLLOUTS = ["abc", "r-1.x", "", "a b", "a:b"]
RESTS = [*PATHS, "v1/messages/count_tokens", "v1/models", "v1beta/models", "reward", "", "v1/chat/completions/",
         "v1/chat/completionsX", "x/v1/chat/completions", "v1/chat", "V1/chat/completions",
         *(f"{v}/models/{m}{a}" for v in ("v1beta", "v1", "v2") for a in (*GEMINI_ACTIONS, ":countTokens", "")
           for m in ("gemini-2.5-flash", "", "a/b", "a:b", "m:generateContent"))]
PATHS_TRIED = [f"/r/{r}/{rest}" for r in ROLLOUTS for rest in RESTS] + [
    "/r/abc", "/r/", "/v1/chat/completions", "/admin/rollouts", "/healthz", "/x/r/abc/v1/chat/completions"]


def _starlette_route(gateway, path: str, method: str) -> tuple[object, dict] | None:
    """The endpoint and path parameters Starlette's router picks (its first full match), or None."""
    scope = {"type": "http", "path": path, "method": method, "root_path": "", "headers": []}
    for route in gateway.routes.router.routes:
        found, child = route.matches(scope)
        if found == Match.FULL:
            return child.get("endpoint"), child.get("path_params", {})
    return None


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_lane_matches_what_starlette_routes_to_a_call(gw, method: str) -> None:
    g = gw.gateway
    lane_hits = 0
    for path in PATHS_TRIED:
        routed = _starlette_route(g, path, method)
        expected = None
        # a call route's endpoint: the call handler with its API bound (call_lane.routes)
        if routed is not None and isinstance(routed[0], functools.partial) and routed[0].func == g.calls.handle:
            expected = (routed[0].keywords["api"], routed[1])
        got = match(path) if method == "POST" else None  # the lane takes POSTs only
        assert got == expected, path
        lane_hits += got is not None
    assert lane_hits == 0 if method == "GET" else lane_hits > 4 * len(PATHS)  # not vacuous


def test_calls_through_the_lane_and_other_routes_through_starlette(gw) -> None:
    r = gw.rollout()
    h = {"Authorization": f"Bearer {r.api_key}"}
    with httpx.Client(timeout=30) as c:
        ok = c.post(f"{r.base_url}/chat/completions", headers=h,
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert ok.status_code == 200, ok.text
        assert ok.headers["x-harnessrl-call-index"] == "0"
        # a GET on a call path is Starlette's 405, answered in OpenAI's error shape and recorded as refused
        wrong = c.get(f"{r.base_url}/chat/completions", headers=h)
        assert wrong.status_code == 405 and "error" in wrong.json()
        counted = c.post(f"{gw.url}/r/{r.id}/v1/messages/count_tokens", headers={"x-api-key": r.api_key},
                         json={"model": "claude", "messages": [{"role": "user", "content": "hi"}]})
        assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    calls = gw.store.get_calls(r.id)
    assert [c.status.value for c in calls] == ["ok", "refused"]


def test_a_handler_that_raises_is_answered_500_and_serving_goes_on(gw) -> None:
    r = gw.rollout()
    h = {"Authorization": f"Bearer {r.api_key}"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    lane = gw.gateway.app
    handle = lane.handle

    async def broken(request, api):
        raise RuntimeError("a bug in a handler")

    lane.handle = broken
    try:
        with httpx.Client(timeout=30) as c:
            failed = c.post(f"{r.base_url}/chat/completions", headers=h, json=body)
    finally:
        lane.handle = handle
    assert failed.status_code == 500
    with httpx.Client(timeout=30) as c:
        assert c.post(f"{r.base_url}/chat/completions", headers=h, json=body).status_code == 200


def test_proxy_headers_reach_starlettes_routes_not_the_lane(gw) -> None:
    """uvicorn's ProxyHeadersMiddleware wraps Starlette's routes only: a same-host TLS proxy's
    X-Forwarded-Proto still makes the admin API hand out https base URLs, and a call through the lane is
    served and recorded alike with or without it (the lane reads neither the scheme nor the client)."""
    admin = {"Authorization": f"Bearer {gw.gateway.admin_token}"}
    body = {"task_id": "t", "group_id": "g"}
    with httpx.Client(timeout=30) as c:
        plain = c.post(f"{gw.url}/admin/rollouts", headers=admin, json=body).json()
        proxied = c.post(f"{gw.url}/admin/rollouts", json=body,
                         headers={**admin, "X-Forwarded-Proto": "https", "X-Forwarded-For": "10.1.2.3"}).json()
        assert plain["base_url"].startswith("http://127.0.0.1:")
        assert proxied["base_url"] == plain["base_url"].replace("http://", "https://", 1).replace(
            plain["rollout_id"], proxied["rollout_id"])
        call = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        for headers in ({}, {"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.1.2.3"}):
            url = f"{gw.url}/r/{proxied['rollout_id']}/v1/chat/completions"
            r = c.post(url, json=call, headers={**headers, "Authorization": f"Bearer {proxied['api_key']}"})
            assert r.status_code == 200, r.text
    assert len(gw.store.get_calls(proxied["rollout_id"])) == 2
