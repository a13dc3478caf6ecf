"""Production mode over real HTTP with the official clients: sessions by path, header and conversation
prefix; sampled recording; windows that end a session; the session id on every answer."""

from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest

from harnessrl.production.config import FeedbackConfig, ProductionConfig
from harnessrl.production.sessions import sampled
from harnessrl.types import ApiKind


def _chat(client: openai.OpenAI, *messages: str, system: str = "be brief") -> tuple[str, str]:
    """One chat call; returns (session id header, answer text)."""
    msgs = [{"role": "system", "content": system}]
    for i, m in enumerate(messages):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": m})
    raw = client.chat.completions.with_raw_response.create(model="policy", messages=msgs, max_tokens=8)
    return raw.headers["x-session-id"], raw.parse().choices[0].message.content


def test_a_session_named_in_the_path_is_one_recorded_rollout(production) -> None:  # noqa: ANN001
    dep = production.deployment("support")
    key = production.key("support")
    client = openai.OpenAI(base_url=f"{production.url}/p/support/s/conv-1/v1", api_key=key.key)
    sid, first = _chat(client, "hello")
    sid2, _ = _chat(client, "hello", first, "and then?")
    assert sid == sid2 == "conv-1"
    (s,) = production.sessions("support")
    assert (s["id"], s["calls"], s["recorded"], s["arm"], s["outcome_status"]) == ("conv-1", 2, True, "stable", "open")
    rollout = production.store.get_rollout(s["rollout_id"])
    assert (rollout.run_id, rollout.task_id, rollout.group_id) == (dep["run_id"], "conv-1", "support")
    calls = production.store.get_calls(s["rollout_id"])
    assert [c.api for c in calls] == [ApiKind.CHAT, ApiKind.CHAT]
    assert calls[1].prompt_token_ids[:len(calls[0].prompt_token_ids)] == calls[0].prompt_token_ids  # one conversation


def test_sessions_by_header_and_by_conversation_prefix(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    named = openai.OpenAI(base_url=key.base_url, api_key=key.key, default_headers={"X-Session-Id": "hdr-7"})
    assert _chat(named, "hi")[0] == "hdr-7"
    plain = openai.OpenAI(base_url=key.base_url, api_key=key.key)
    a1, answer = _chat(plain, "what is 2+2?")
    a2, _ = _chat(plain, "what is 2+2?", answer, "sure?")  # the same conversation, one turn later
    b1, _ = _chat(plain, "what is 3+3?")  # another opening: another session
    c1, _ = _chat(plain, "what is 2+2?", system="be verbose")  # another system text: another session
    assert a1 == a2 and a1.startswith("p-") and len({a1, b1, c1}) == 3
    other = production.key("support", "second app")  # the same opening from another key: its own session
    assert _chat(openai.OpenAI(base_url=other.base_url, api_key=other.key), "what is 2+2?")[0] != a1
    calls = {s["id"]: s["calls"] for s in production.sessions("support")}
    assert calls["hdr-7"] == 1 and calls[a1] == 2 and calls[b1] == 1


def test_anthropic_and_streaming_calls_carry_the_session(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    claude = anthropic.Anthropic(base_url=key.anthropic_base_url, api_key=key.key,
                                 default_headers={"X-Session-Id": "claude-1"})
    raw = claude.messages.with_raw_response.create(model="policy", max_tokens=8,
                                                   messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["x-session-id"] == "claude-1" and raw.parse().content[0].text
    count = claude.messages.count_tokens(model="policy", messages=[{"role": "user", "content": "hi"}])
    assert count.input_tokens > 0
    client = openai.OpenAI(base_url=f"{production.url}/p/support/s/stream-1/v1", api_key=key.key)
    with client.chat.completions.with_streaming_response.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=8, stream=True) as resp:
        assert resp.headers["x-session-id"] == "stream-1"
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    assert text
    assert [m.id for m in client.models.list().data] == ["policy"]
    sessions = {s["id"]: s for s in production.sessions("support")}
    assert set(sessions) == {"claude-1", "stream-1"}  # counting tokens opens no session
    (call,) = production.store.get_calls(sessions["stream-1"]["rollout_id"])
    assert call.completion_token_ids and call.completion_logprobs
    (call,) = production.store.get_calls(sessions["claude-1"]["rollout_id"])
    assert call.api == ApiKind.ANTHROPIC_MESSAGES


def test_sampled_recording_stores_a_fraction_and_counts_every_session(production) -> None:  # noqa: ANN001
    dep = production.deployment("sampled", record_fraction=0.3)
    key = production.key("sampled")
    ids = [f"s{i}" for i in range(40)]
    for sid in ids:
        client = openai.OpenAI(base_url=f"{production.url}/p/sampled/s/{sid}/v1", api_key=key.key)
        assert _chat(client, f"question {sid}")[1]
    sessions = production.sessions("sampled")
    assert sorted(s["id"] for s in sessions) == sorted(ids) and all(s["calls"] == 1 for s in sessions)
    recorded = {s["id"] for s in sessions if s["recorded"]}
    assert recorded == {sid for sid in ids if sampled("sampled", sid, 0.3)}  # decided by the id alone
    assert 0 < len(recorded) < len(ids)
    assert all((s["rollout_id"] is None) == (s["id"] not in recorded) for s in sessions)
    rollouts = production.store.list_rollouts(run_id=dep["run_id"], limit=1000)
    assert sorted(r.task_id for r in rollouts) == sorted(recorded)
    assert sum(len(production.store.get_calls(r.id)) for r in rollouts) == len(recorded)
    assert production.gateway.recorder.recorded == len(recorded)  # nothing else was written


def test_a_session_whose_window_closed_takes_no_more_calls(make_production) -> None:  # noqa: ANN001
    production = make_production(ProductionConfig(feedback=FeedbackConfig(window_s=0.6, missing=0.0)))
    production.deployment("support")
    key = production.key("support")
    named = openai.OpenAI(base_url=f"{production.url}/p/support/s/short/v1", api_key=key.key, max_retries=0)
    _chat(named, "hi")
    plain = openai.OpenAI(base_url=key.base_url, api_key=key.key)
    first, _ = _chat(plain, "same opening")
    time.sleep(0.8)
    with pytest.raises(openai.ConflictError, match="short.*is over"):
        _chat(named, "hi")
    second, _ = _chat(plain, "same opening")  # a derived session starts its next generation
    assert second == f"{first}.1"


def test_bad_session_ids_are_refused(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    auth = {"Authorization": f"Bearer {key.key}"}
    body = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with httpx.Client(base_url=production.url, timeout=30, headers=auth) as http:
        for headers, path in [({"X-Session-Id": "has space"}, "/p/support/v1/chat/completions"),
                              ({"X-Session-Id": "x" * 129}, "/p/support/v1/chat/completions"),
                              ({}, "/p/support/s/bad%24id/v1/chat/completions")]:
            r = http.post(path, json=body, headers=headers)
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_session_id", r.text
        assert http.post("/p/support/v1/chat/completions", json=body,
                         headers={"X-Session-Id": "ok:id-1.2_3"}).status_code == 200
    assert [s["id"] for s in production.sessions("support")] == ["ok:id-1.2_3"]


def test_metrics_count_sessions(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    for sid in ("m1", "m2"):
        _chat(openai.OpenAI(base_url=f"{production.url}/p/support/s/{sid}/v1", api_key=key.key), "hi")
    text = httpx.get(f"{production.url}/metrics").text
    assert "harnessrl_production_sessions_opened_total 2" in text
    assert "harnessrl_production_sessions_recorded_total 2" in text


def test_an_idle_derived_session_is_over_a_named_one_goes_on(make_production) -> None:  # noqa: ANN001
    production = make_production(ProductionConfig(session_idle_s=0.3))
    production.deployment("support")
    key = production.key("support")
    plain = openai.OpenAI(base_url=key.base_url, api_key=key.key)
    named = openai.OpenAI(base_url=key.base_url, api_key=key.key, default_headers={"X-Session-Id": "kept"})
    first, answer = _chat(plain, "same opening")
    assert _chat(plain, "same opening", answer, "more")[0] == first  # within the idle time: the same session
    _chat(named, "hi")
    time.sleep(0.5)
    assert _chat(plain, "same opening")[0] == f"{first}.1"  # the same opening after a pause: a new conversation
    assert _chat(named, "hi")[0] == "kept"  # the application said which session it is
    calls = {s["id"]: s["calls"] for s in production.sessions("support")}
    assert calls == {first: 2, f"{first}.1": 1, "kept": 2}


def test_feedback_reaches_the_session_through_the_app_key(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    sid, _ = _chat(openai.OpenAI(base_url=key.base_url, api_key=key.key), "rate me")
    auth = {"Authorization": f"Bearer {key.key}"}
    r = httpx.post(f"{production.url}/p/support/feedback", headers=auth,
                   json={"session_id": sid, "name": "thumbs", "value": 1})
    assert r.status_code == 201, r.text
    r = httpx.post(f"{production.url}/p/support/feedback", headers=auth,
                   json={"session_id": "never-seen", "name": "thumbs", "value": 1})
    assert r.status_code == 404, r.text
    assert [(f.name, f.value) for f in production.store.get_feedback("support", sid)] == [("thumbs", 1.0)]


def test_responses_and_completions_in_a_named_session(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    client = openai.OpenAI(base_url=f"{production.url}/p/support/s/agent-1/v1", api_key=key.key)
    first = client.responses.create(model="policy", input="hello", max_output_tokens=8)
    second = client.responses.create(model="policy", input="and then?", previous_response_id=first.id,
                                     max_output_tokens=8)  # the session's memory, as on a rollout route
    assert first.output_text and second.output_text
    assert client.completions.create(model="policy", prompt="once upon", max_tokens=4).choices[0].text
    (s,) = production.sessions("support")
    calls = production.store.get_calls(s["rollout_id"])
    assert [c.api for c in calls] == [ApiKind.RESPONSES, ApiKind.RESPONSES, ApiKind.COMPLETIONS] and s["calls"] == 3
