"""Replaying the requests the real CLIs sent (captured by tests/e2e/clis, in tests/fixtures/cli_requests):
each is served (200), answered in its API's own complete event stream, and recorded OK."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from harnessrl.types import CallStatus

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli_requests"
FILES = sorted(FIXTURES.glob("*.json")) if FIXTURES.is_dir() else []
_LAST = {"/v1/messages": b"event: message_stop", "/v1/responses": b"response.completed",
         "/v1/chat/completions": b"data: [DONE]"}


@pytest.mark.skipif(not FILES, reason="no captured CLI requests")
@pytest.mark.parametrize("fixture", FILES, ids=[f.stem for f in FILES])
def test_captured_cli_requests_are_served(gw, fixture):
    captured = json.loads(fixture.read_text())
    r = gw.rollout()
    served = 0
    for req in captured["requests"]:
        if req.get("method", "POST") != "POST" or "/reward" in req["path"]:
            continue
        headers = {k: v for k, v in req.get("headers", {}).items()
                   if k.lower() not in ("x-api-key", "authorization", "content-length", "host",
                                        "accept-encoding", "connection")}
        headers["Authorization"] = f"Bearer {r.api_key}"
        url = gw.url + req["path"].replace("ROLLOUT", r.id)
        resp = httpx.post(url, json=req["body"], headers=headers, timeout=60)
        assert resp.status_code == 200, f"{req['path']}: {resp.status_code} {resp.text[:500]}"
        path = req["path"].split("?")[0].split(r.id, 1)[-1]
        if isinstance(req["body"], dict) and req["body"].get("stream") and path in _LAST:
            assert _LAST[path] in resp.content, resp.content[-300:]
        if not path.endswith("count_tokens"):
            served += 1
    calls = gw.store.get_calls(r.id)
    assert len(calls) == served and all(c.status == CallStatus.OK for c in calls)
    assert all(c.completion_token_ids for c in calls)
