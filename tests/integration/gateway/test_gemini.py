"""Google's Gemini API on a rollout's routes, over real HTTP: what is served and recorded (the model named in
the path), its key forms, its refusals in Google's error shape (recorded as refused calls), the model list,
countTokens, streaming as sampled (SSE and Google's JSON array), and a restart in token-exact render mode."""

from __future__ import annotations

import logging
import time

import httpx
import orjson
import pytest
from fakes.fake_engine import END, render_chat

from harnessrl.types import ApiKind, CallStatus, Fidelity

HELLO = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


def _url(r, action: str, model: str = "gemini-2.5-flash", version: str = "v1beta") -> str:
    return f"{r.base_url.removesuffix('/v1')}/{version}/models/{model}:{action}"


def _key(r) -> dict[str, str]:
    return {"x-goog-api-key": r.api_key}


def test_generate_content_is_served_and_recorded_token_exact(gw):
    r = gw.rollout()
    body = {**HELLO, "systemInstruction": {"parts": [{"text": "Be terse."}]},
            "generationConfig": {"maxOutputTokens": 64, "temperature": 0.3, "thinkingConfig": {"thinkingBudget": 0}}}
    resp = httpx.post(_url(r, "generateContent"), json=body, headers=_key(r))
    assert resp.status_code == 200, resp.text
    out = resp.json()
    cand = out["candidates"][0]
    assert cand["finishReason"] == "STOP" and cand["content"]["role"] == "model"
    text = cand["content"]["parts"][0]["text"]
    assert out["modelVersion"] == "gemini-2.5-flash" and out["responseId"]
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.GEMINI and call.status == CallStatus.OK
    assert call.requested_model == "gemini-2.5-flash" and call.request == body
    assert call.prompt_token_ids == render_chat([{"role": "system", "content": "Be terse."},
                                                 {"role": "user", "content": "hello"}])
    assert call.completion_token_ids == [*text.encode(), END]
    assert len(call.choices[0].logprobs) == len(call.completion_token_ids)
    assert out["usageMetadata"] == {"promptTokenCount": len(call.prompt_token_ids),
                                    "candidatesTokenCount": len(call.completion_token_ids),
                                    "totalTokenCount": len(call.prompt_token_ids) + len(call.completion_token_ids)}
    assert call.sampling["temperature"] == 0.3 and call.sampling["max_tokens"] == 64
    assert call.sampling["adjusted"]["ignored_fields"] == ["generationConfig.thinkingConfig"]
    assert call.response == out
    # the same under /v1 (google-genai's default version), any model name
    again = httpx.post(_url(r, "generateContent", "my-model", "v1"), json=HELLO, headers=_key(r))
    assert again.status_code == 200 and again.json()["modelVersion"] == "my-model"
    assert gw.store.get_calls(r.id)[1].requested_model == "my-model"


def test_key_forms_and_the_key_never_logged(gw, caplog: pytest.LogCaptureFixture):
    r = gw.rollout()
    base = _url(r, "generateContent")
    with caplog.at_level(logging.INFO, logger="harnessrl"):
        ok = httpx.post(f"{base}?key={r.api_key}", json=HELLO)
        none = httpx.post(base, json=HELLO)
        wrong = httpx.post(f"{base}?key=AIzaWRONG", json=HELLO)
    assert ok.status_code == 200, ok.text
    assert none.status_code == 401 and none.json()["error"]["status"] == "UNAUTHENTICATED"
    assert wrong.status_code == 403 and wrong.json()["error"]["status"] == "PERMISSION_DENIED"
    assert r.api_key not in caplog.text and "AIzaWRONG" not in caplog.text
    # the query form is Google's, read on the model routes only
    chat = httpx.post(f"{r.base_url}/chat/completions?key={r.api_key}",
                      json={"messages": [{"role": "user", "content": "x"}]})
    assert chat.status_code == 401


@pytest.mark.parametrize(("data", "needle", "code"), [
    (b"{", "malformed JSON", "bad_request"),
    (b"[]", "the request body must be an object", "bad_request"),
    (orjson.dumps({"contents": "hi"}), "'contents' is required", "bad_request"),
    (orjson.dumps({"contents": [{"role": "user", "parts": [{"text": 1}]}]}), "parts[0].text", "bad_request"),
    (orjson.dumps({"contents": [{"parts": [{"inline_data": {"mime_type": "image/png", "data": "AA=="}}]}]}),
     "inlineData", "unsupported_content"),
    (orjson.dumps({**HELLO, "generationConfig": {"temperature": "hot"}}), "temperature", "bad_request"),
])
def test_bad_bodies_are_400_in_googles_shape_and_recorded_as_refused(gw, data, needle, code):
    r = gw.rollout()
    resp = httpx.post(_url(r, "streamGenerateContent") + "?alt=sse", content=data,
                      headers={**_key(r), "content-type": "application/json"})
    assert resp.status_code == 400 and resp.headers["content-type"] == "application/json"
    err = resp.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT" and needle in err["message"]
    assert err["details"][0]["reason"] == code
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.GEMINI and call.status == CallStatus.REFUSED and call.error.startswith("400")
    assert call.requested_model == "gemini-2.5-flash"  # the path's, as on served calls


def test_models_list_lookup_and_count_tokens(gw):
    r = gw.rollout()
    root = r.base_url.removesuffix("/v1")
    listed = httpx.get(f"{root}/v1beta/models", headers=_key(r)).json()
    assert [m["name"] for m in listed["models"]] == ["models/policy"]
    assert "generateContent" in listed["models"][0]["supportedGenerationMethods"]
    one = httpx.get(f"{root}/v1beta/models/gemini-2.5-pro", headers=_key(r)).json()
    assert one["name"] == "models/gemini-2.5-pro" and one["baseModelId"] == "policy"
    assert httpx.get(f"{root}/v1/models", headers=_key(r)).json()["models"][0]["name"] == "models/policy"
    openai_list = httpx.get(f"{root}/v1/models", headers={"Authorization": f"Bearer {r.api_key}"}).json()
    assert openai_list["data"][0]["id"] == "policy"  # OpenAI's clients keep their own shape
    assert httpx.get(f"{root}/v1beta/models", headers={"x-goog-api-key": "no"}).json()["error"]["code"] == 403
    count = httpx.post(_url(r, "countTokens"), json=HELLO, headers=_key(r))
    assert count.status_code == 200 and count.json()["totalTokens"] >= 1
    wrapped = httpx.post(_url(r, "countTokens"), headers=_key(r),
                         json={"generateContentRequest": {"model": "models/x", **HELLO}})
    assert wrapped.json() == count.json()
    assert httpx.post(_url(r, "countTokens"), json={}, headers=_key(r)).json()["error"]["status"] == "INVALID_ARGUMENT"
    assert gw.store.get_calls(r.id) == []  # counting is not a sampled call
    unserved = httpx.post(_url(r, "embedContent"), json=HELLO, headers=_key(r))
    assert unserved.status_code == 404 and unserved.json()["error"]["status"] == "NOT_FOUND"


DELAY = 0.04  # seconds between the engine's chunks


def _timed_pieces(resp: httpx.Response, sse: bool) -> list[tuple[float, str]]:
    t0 = time.perf_counter()
    pieces, buf = [], b""
    for raw in resp.iter_raw():
        buf += raw
        if sse:
            frames = buf.split(b"\r\n\r\n")
            buf = frames.pop()
            objs = [orjson.loads(f.removeprefix(b"data: ")) for f in frames if f.startswith(b"data: ")]
        else:  # Google's JSON array: '[' chunk (',\r\n' chunk)* ']'
            frames = buf.split(b",\r\n")
            buf = frames.pop()
            objs = [orjson.loads(f.lstrip(b"[")) for f in frames]
        for obj in objs:
            for part in obj["candidates"][0].get("content", {}).get("parts", []):
                if part.get("text"):
                    pieces.append((time.perf_counter() - t0, part["text"]))
    if not sse:
        last = orjson.loads(buf.lstrip(b"[").removesuffix(b"]"))
        assert last["candidates"][0]["finishReason"] in ("STOP", "MAX_TOKENS") and last["usageMetadata"]
    return pieces


@pytest.mark.parametrize("sse", [True, False])
def test_streamed_as_sampled_in_sse_and_in_googles_json_array(gw, sse):
    gw.engine.token_delay_s = DELAY
    r = gw.rollout()
    url = _url(r, "streamGenerateContent") + ("?alt=sse" if sse else "")
    with httpx.stream("POST", url, json=HELLO, headers=_key(r), timeout=30) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream" if sse else "application/json")
        pieces = _timed_pieces(resp, sse)
    assert len(pieces) >= 3, pieces
    assert pieces[-1][0] - pieces[0][0] > 5 * DELAY, pieces  # spread over the sampling time, not one burst
    (call,) = gw.store.get_calls(r.id)
    assert call.response["candidates"][0]["content"]["parts"] == [{"text": "".join(t for _, t in pieces)}]
    assert call.completion_token_ids and call.prompt_token_ids


def test_engine_failing_mid_stream_ends_in_googles_error_and_is_recorded(gw):
    r = gw.rollout()
    gw.engine.break_stream_after = 6
    with httpx.stream("POST", _url(r, "streamGenerateContent") + "?alt=sse", json=HELLO, headers=_key(r),
                      timeout=30) as resp:
        frames = [orjson.loads(f.removeprefix(b"data: ")) for f in resp.read().split(b"\r\n\r\n") if f]
    assert frames[-1]["error"]["status"] == "UNAVAILABLE" and "candidates" in frames[0]
    (call,) = gw.store.get_calls(r.id)
    assert call.status == CallStatus.ERROR and call.completion_token_ids


def test_function_call_ids_round_trip_and_a_restart_keeps_token_reuse(make_gateway):
    """The functionCall's id comes back with its functionResponse (or is matched by name when the harness
    drops it); after a restart the next prompt in gateway render mode extends the stored tokens."""
    pytest.importorskip("transformers")
    from harnessrl.gateway.render import RenderConfig

    gw = make_gateway()
    r = gw.rollout()
    tools = [{"functionDeclarations": [{"name": "double", "parameters": {
        "type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}}]}]
    first = httpx.post(_url(r, "generateContent"), headers=_key(r),
                       json={**HELLO, "tools": tools}).json()["candidates"][0]["content"]
    fc = first["parts"][0]["functionCall"]
    assert fc["name"] == "double" and set(fc["args"]) == {"n"} and fc["id"]
    no_id = {"role": "model", "parts": [{"functionCall": {"name": "double", "args": fc["args"]}}]}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "double", "response": {"result": "4"}}}]}
    for model_turn in (first, no_id):
        resp = httpx.post(_url(r, "generateContent"), headers=_key(r),
                          json={"contents": [*HELLO["contents"], model_turn, answer], "tools": tools})
        assert resp.status_code == 200, resp.text
        sent = gw.engine.requests[-1]["messages"]
        assert sent[-1] == {"role": "tool", "tool_call_id": sent[-2]["tool_calls"][0]["id"], "content": "4"}
    assert gw.store.get_calls(r.id)[1].fidelity == Fidelity.EXTENDED

    config = {"render_mode": "gateway", "render": RenderConfig(tokenizer="tiny")}
    gw = make_gateway(**config)
    r = gw.rollout()
    out = httpx.post(_url(r, "generateContent"), headers=_key(r),
                     json={**HELLO, "generationConfig": {"maxOutputTokens": 8}}).json()
    gw.server.stop()
    gw2 = make_gateway(**config)  # same store, fresh memory
    again = {"contents": [*HELLO["contents"], out["candidates"][0]["content"],
                          {"role": "user", "parts": [{"text": "and again"}]}],
             "generationConfig": {"maxOutputTokens": 8}}
    resp = httpx.post(f"{gw2.url}/r/{r.id}/v1beta/models/gemini-2.5-flash:generateContent", json=again,
                      headers=_key(r))
    assert resp.status_code == 200, resp.text
    calls = gw2.store.get_calls(r.id)
    assert calls[1].fidelity == Fidelity.EXTENDED, calls[1].fidelity_reason
    base = calls[0].prompt_token_ids + calls[0].completion_token_ids
    assert calls[1].prompt_token_ids[: len(base)] == base
