"""Codex's Responses WebSocket transport (issue 53 item 0).

Codex's built-in provider opens ``GET <base>/responses`` with ``Upgrade: websocket`` and an ``openai-beta:
responses_websockets=...`` header before its first POST. The gateway does not serve that mode; it answers
426 Upgrade Required, the one status on which Codex falls back to HTTP at once for the rest of its session
(a 403, 404 or 405 it retried as a failed stream, ~6.4 s lost per attempt), and records the refusal under the
Responses API its path names (it was recorded under chat completions). Checked with the ``websockets``
client (a real handshake, as Codex sends it) and with a plain GET that asks to upgrade but that the server
reads as HTTP (a server without a WebSocket library, or a proxy that drops ``Connection: Upgrade``).
"""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
import websockets

from harnessrl.types import ApiKind, CallStatus

BETA = {"openai-beta": "responses_websockets=2026-02-06"}


def _handshake(url: str, key: str) -> websockets.InvalidStatus:
    async def go() -> websockets.InvalidStatus:
        with pytest.raises(websockets.InvalidStatus) as err:
            async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}", **BETA}):
                pass
        return err.value

    return asyncio.run(go())


@pytest.mark.parametrize("suffix", ["/v1/responses", "/responses"])
def test_a_websocket_handshake_on_responses_is_426_and_recorded_under_responses(gw, suffix: str) -> None:
    r = gw.rollout()
    url = r.base_url.removesuffix("/v1").replace("http://", "ws://") + suffix
    refused = _handshake(url, r.api_key)
    assert refused.response.status_code == 426
    error = orjson.loads(refused.response.body or b"{}")["error"]
    assert error["code"] == "websocket_unsupported" and "POST" in error["message"]
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.RESPONSES and call.status == CallStatus.REFUSED
    assert call.error is not None and call.error.startswith("426 websocket_unsupported")
    assert call.sampling["route"] == f"GET /r/{r.id}{suffix}"


def test_an_upgrade_read_as_http_is_426_too_and_a_post_after_it_is_served(gw) -> None:
    r = gw.rollout()
    headers = {"Authorization": f"Bearer {r.api_key}", "Upgrade": "websocket", **BETA}
    resp = httpx.get(f"{r.base_url}/responses", headers=headers)
    assert resp.status_code == 426 and resp.json()["error"]["code"] == "websocket_unsupported"
    served = httpx.post(f"{r.base_url}/responses", json={"model": "gpt-5.1-codex", "input": "hi"},
                        headers={"Authorization": f"Bearer {r.api_key}"}, timeout=30)
    assert served.status_code == 200, served.text
    refused, ok = gw.store.get_calls(r.id)
    assert (refused.api, refused.status) == (ApiKind.RESPONSES, CallStatus.REFUSED)
    assert (ok.api, ok.status) == (ApiKind.RESPONSES, CallStatus.OK)


def test_other_refusals_are_recorded_under_the_api_their_path_names(gw) -> None:
    r = gw.rollout()
    headers = {"Authorization": f"Bearer {r.api_key}"}
    assert httpx.get(f"{r.base_url}/responses", headers=headers).status_code == 405  # no upgrade asked
    assert httpx.get(f"{r.base_url}/messages", headers=headers).status_code == 405
    assert httpx.get(f"{r.base_url}/chat/completions", headers=headers).status_code == 405
    ws = r.base_url.replace("http://", "ws://")
    assert _handshake(f"{ws}/chat/completions", r.api_key).response.status_code == 404
    calls = gw.store.get_calls(r.id)
    assert [c.api for c in calls] == [ApiKind.RESPONSES, ApiKind.ANTHROPIC_MESSAGES, ApiKind.CHAT, ApiKind.CHAT]
    assert all(c.status == CallStatus.REFUSED for c in calls)


def test_a_handshake_without_the_rollouts_key_is_refused_and_not_recorded(gw) -> None:
    r = gw.rollout()
    url = r.base_url.replace("http://", "ws://") + "/responses"
    assert _handshake(url, "wrong-key").response.status_code == 426
    assert gw.store.get_calls(r.id) == []
