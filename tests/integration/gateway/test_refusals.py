"""A request no route serves gets a JSON error in its own API's shape, and a WARNING line in the log, with
real clients: the OpenAI and Anthropic SDKs report the gateway's message (not a parse error of plain text),
and a Gemini-style call with no key the gateway knows gets Google's error shape, its key never logged.
A refusal under an authorized rollout is also recorded on it as a ``refused`` call (what ``harnessrl show``
lists): the request as sent, redacted like every call, and the error the harness got."""

from __future__ import annotations

import logging
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from harnessrl.cli import main as cli_main
from harnessrl.types import ApiKind, CallStatus


def test_openai_client_on_an_unserved_path_reads_a_json_error(gw, caplog: pytest.LogCaptureFixture) -> None:
    r = gw.rollout()
    client = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    with caplog.at_level(logging.WARNING, logger="harnessrl.gateway"):
        with pytest.raises(openai.NotFoundError) as err:
            client.embeddings.create(model="m", input="hello")
    body = err.value.response.json()
    assert body["error"]["code"] == "unknown_route" and body["error"]["type"] == "invalid_request_error"
    assert f"POST /r/{r.id}/v1/embeddings" in body["error"]["message"]
    assert "chat/completions" in body["error"]["message"]  # what is served instead
    assert f"refused POST /r/{r.id}/v1/embeddings: 404 unknown_route" in caplog.text


def test_a_wrong_method_is_405_in_json(gw) -> None:
    r = gw.rollout()
    resp = httpx.get(f"{r.base_url}/chat/completions", headers={"Authorization": f"Bearer {r.api_key}"})
    assert resp.status_code == 405 and resp.headers["content-type"] == "application/json"
    assert resp.json()["error"]["code"] == "unknown_route"
    assert "method not allowed: GET" in resp.json()["error"]["message"]


def test_anthropic_client_with_a_wrong_base_url_reads_its_own_error_shape(gw) -> None:
    r = gw.rollout()
    # ANTHROPIC_BASE_URL is the rollout's URL without /v1; given the /v1 one, the SDK asks /v1/v1/messages.
    client = anthropic.Anthropic(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    body = err.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert f"/r/{r.id}/v1/v1/messages" in body["error"]["message"]


def test_a_gemini_call_gets_googles_error_shape_and_its_key_stays_out_of_the_log(
        gw, caplog: pytest.LogCaptureFixture) -> None:
    r = gw.rollout()
    base = r.base_url.removesuffix("/v1")
    with caplog.at_level(logging.WARNING, logger="harnessrl.gateway"):
        resp = httpx.post(f"{base}/v1beta/models/gemini-2.5-pro:embedContent?alt=sse&key=AIzaSECRET",
                          json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                          headers={"x-goog-api-key": r.api_key})
    assert resp.status_code == 404
    err = resp.json()["error"]
    assert err["code"] == 404 and err["status"] == "NOT_FOUND" and "embedContent" in err["message"]
    assert "AIzaSECRET" not in resp.text
    assert "embedContent: 404 unknown_route" in caplog.text
    assert "AIzaSECRET" not in caplog.text and r.api_key not in caplog.text


def test_a_known_route_still_answers_its_own_404(gw) -> None:
    """Not-found raised by a handler (an unknown rollout) keeps the handler's code."""
    resp = gw.admin.post("/admin/rollouts/nope/closed", json={})
    assert resp.status_code == 404 and resp.json()["error"]["code"] != "unknown_route"


def test_a_call_refused_before_serving_is_logged_with_its_rollout_and_reason(
        gw, caplog: pytest.LogCaptureFixture) -> None:
    r = gw.rollout()
    client = anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    with caplog.at_level(logging.WARNING, logger="harnessrl.gateway"):
        with pytest.raises(anthropic.BadRequestError) as err:
            client.messages.create(model="m", max_tokens=8, messages=[
                {"role": "user", "content": [{"type": "text", "text": "a private prompt"}, image]}])
        with pytest.raises(anthropic.PermissionDeniedError):
            anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key="wrong-key", max_retries=0) \
                .messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    code = err.value.response.json()["error"]["code"]
    assert f"rollout {r.id}: refused POST /r/{r.id}/v1/messages: 400 {code}: " in caplog.text
    assert f"rollout {r.id}: refused POST /r/{r.id}/v1/messages: 403 wrong_api_key" in caplog.text
    assert "a private prompt" not in caplog.text and "wrong-key" not in caplog.text and r.api_key not in caplog.text


def test_refused_calls_are_recorded_on_their_rollout_with_the_request_redacted(
        gw, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    r = gw.rollout()
    secret = "sk-" + "A1b2C3d4" * 5
    client = anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-x", max_tokens=8, messages=[
            {"role": "user", "content": [{"type": "text", "text": f"my key is {secret}"}, image]}])
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0).embeddings.create(model="m", input="x")
    bad = httpx.post(f"{r.base_url}/chat/completions", content=b"{not json",
                     headers={"Authorization": f"Bearer {r.api_key}", "content-type": "application/json"})
    assert bad.status_code == 400
    image_call, route_call, body_call = gw.store.get_calls(r.id)
    assert {c.status for c in (image_call, route_call, body_call)} == {CallStatus.REFUSED}
    assert image_call.api == ApiKind.ANTHROPIC_MESSAGES and image_call.requested_model == "claude-x"
    assert image_call.error is not None and image_call.error.startswith("400 unsupported_content: ")
    assert image_call.request["messages"][0]["content"][1]["type"] == "image"  # the request as sent ...
    assert secret not in str(image_call.request)  # ... redacted as every call is
    assert image_call.sampling["route"] == f"POST /r/{r.id}/v1/messages"
    assert image_call.prompt_token_ids == [] and image_call.completion_token_ids == []
    assert route_call.error is not None and route_call.error.startswith("404 unknown_route: ")
    assert route_call.sampling["route"] == f"POST /r/{r.id}/v1/embeddings"
    assert body_call.request == {} and body_call.error is not None and body_call.error.startswith("400 ")
    # what a user reads: `harnessrl show` lists them, with the route, the code and the reason
    assert cli_main(["show", r.id, "--db", f"sqlite:///{tmp_path / 'gw.db'}"]) == 0
    out = capsys.readouterr().out
    assert "refused and failed calls" in out and "400 unsupported_content" in out and "404 unknown_route" in out
    assert f"POST /r/{r.id}/v1/embeddings" in out and secret not in out


def test_a_refusal_that_names_no_authorized_rollout_records_nothing(gw) -> None:
    r = gw.rollout()
    wrong = openai.OpenAI(base_url=r.base_url, api_key="not-its-key", max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        wrong.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError):
        wrong.embeddings.create(model="m", input="x")
    assert gw.store.get_calls(r.id) == []


def test_a_refused_call_does_not_use_the_call_budget_and_a_used_up_budget_is_a_refusal(make_gateway) -> None:
    from harnessrl.gateway.config import GatewayLimits

    gw = make_gateway(limits=GatewayLimits(max_calls_per_rollout=1))
    r = gw.rollout()
    client = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], n=0)
    ok = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert ok.choices[0].message.content  # the refused call did not use the one call allowed
    with pytest.raises(openai.BadRequestError, match="call budget"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert [c.status for c in gw.store.get_calls(r.id)] == [CallStatus.REFUSED, CallStatus.OK, CallStatus.REFUSED]
