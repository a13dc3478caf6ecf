"""Every API under the rollout's URL with and without ``/v1`` (issue 53 item 0).

Harnesses built on the Vercel AI SDK read ``ANTHROPIC_BASE_URL`` and append only ``/messages`` (they expect
the base to end in ``/v1``): with the URL harnessrl hands out, ``POST /r/<id>/messages`` was a 404. The
OpenAI clients given the rollout's URL without ``/v1`` append ``/chat/completions``, ``/responses``, ...
the same way; Google's (``@ai-sdk/google``) given a base that names a version append ``/models/...``.
Each is served, recorded under its API, and no route shadows another.
"""

from __future__ import annotations

import anthropic
import httpx
import openai

from harnessrl.types import ApiKind, CallStatus

HELLO = [{"role": "user", "content": "hi"}]


def _root(r) -> str:
    return r.base_url.removesuffix("/v1")


def test_vercel_style_anthropic_paths_without_v1_are_served(gw) -> None:
    r = gw.rollout()
    headers = {"x-api-key": r.api_key, "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": HELLO}
    with httpx.Client(base_url=_root(r), headers=headers, timeout=30) as c:
        resp = c.post("/messages", json=body)
        assert resp.status_code == 200, resp.text
        assert resp.json()["type"] == "message"
        streamed = c.post("/messages", json={**body, "stream": True})
        assert streamed.status_code == 200 and "event: message_stop" in streamed.text
        counted = c.post("/messages/count_tokens", json={"model": "m", "messages": HELLO})
        assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
        models = c.get("/models")
        assert models.status_code == 200 and models.json()["data"][0]["id"]
    calls = gw.store.get_calls(r.id)
    assert [(c.api, c.status) for c in calls] == [(ApiKind.ANTHROPIC_MESSAGES, CallStatus.OK)] * 2


def test_the_anthropic_client_is_served_both_ways(gw) -> None:
    """Its own convention (base without /v1, the SDK appends /v1/messages) still works beside the other."""
    r = gw.rollout()
    client = anthropic.Anthropic(base_url=_root(r), api_key=r.api_key, max_retries=0)
    msg = client.messages.create(model="m", max_tokens=8, messages=HELLO)
    assert msg.type == "message"
    assert client.messages.count_tokens(model="m", messages=HELLO).input_tokens > 0


def test_openai_clients_given_the_url_without_v1_are_served(gw) -> None:
    r = gw.rollout()
    c = openai.OpenAI(base_url=_root(r), api_key=r.api_key, max_retries=0)
    chat = c.chat.completions.create(model="m", messages=HELLO, max_tokens=4)
    assert chat.choices[0].message.role == "assistant"
    text = c.completions.create(model="m", prompt="hi", max_tokens=4)
    assert text.choices[0].text is not None
    resp = c.responses.create(model="m", input="hi", max_output_tokens=4)
    assert resp.object == "response"
    assert [m.id for m in c.models.list()] and c.models.retrieve("gpt-5").id == "gpt-5"
    apis = [call.api for call in gw.store.get_calls(r.id)]
    assert apis == [ApiKind.CHAT, ApiKind.COMPLETIONS, ApiKind.RESPONSES]


def test_gemini_paths_without_a_version_are_served(gw) -> None:
    r = gw.rollout()
    headers = {"x-goog-api-key": r.api_key}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.Client(base_url=_root(r), headers=headers, timeout=30) as c:
        resp = c.post("/models/gemini-2.5-flash:generateContent", json=body)
        assert resp.status_code == 200, resp.text
        assert resp.json()["candidates"][0]["content"]["role"] == "model"
        counted = c.post("/models/gemini-2.5-flash:countTokens", json=body)
        assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
        one = c.get("/models/gemini-2.5-flash")
        assert one.status_code == 200 and one.json()["name"] == "models/gemini-2.5-flash"
        listed = c.get("/models")  # Google's key header: Google's list shape on OpenAI's path
        assert listed.status_code == 200 and "models" in listed.json()
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.GEMINI and call.requested_model == "gemini-2.5-flash"


def test_paths_that_stay_unserved_still_get_the_json_404(gw) -> None:
    """Neither convention opens more than the APIs' own paths: a doubled /v1 or an unknown path is refused."""
    r = gw.rollout()
    headers = {"Authorization": f"Bearer {r.api_key}"}
    for path in ("/v1/v1/chat/completions", "/messages/batches", "/embeddings", "/v1/v1/messages"):
        resp = httpx.post(f"{_root(r)}{path}", json={}, headers=headers)
        assert resp.status_code == 404, path
        assert "unknown_route" in resp.text
