"""Auth, limits, bad input, rewards and the admin API: every refusal is a 4xx in the OpenAI error shape."""

from __future__ import annotations

import httpx
import openai
import pytest

from harnessrl.gateway import GatewayLimits
from harnessrl.types import CallStatus, RolloutStatus

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def post(gw, rollout, path="/v1/chat/completions", key=None, **kw) -> httpx.Response:
    headers = kw.pop("headers", {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{gw.url}/r/{rollout}{path}", headers=headers, timeout=30, **kw)


def assert_error(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert isinstance(err["message"], str) and err["message"] and "type" in err and "code" in err
    return err


def test_auth(gw):
    a, b = gw.rollout(), gw.rollout()
    assert_error(post(gw, a.id, json=CHAT), 401)
    assert_error(post(gw, a.id, key=b.api_key, json=CHAT), 403)
    assert_error(post(gw, a.id, key="admin-secret", json=CHAT), 403)
    assert_error(post(gw, "nope", key=a.api_key, json=CHAT), 404)
    assert post(gw, a.id, headers={"x-api-key": a.api_key}, json=CHAT).status_code == 200
    assert post(gw, a.id, key=a.api_key, json=CHAT).status_code == 200
    assert len(gw.store.get_calls(a.id)) == 2 and gw.store.get_calls(b.id) == []
    # the admin API refuses rollout keys and no key
    assert_error(httpx.get(f"{gw.url}/admin/rollouts"), 401)
    assert_error(httpx.get(f"{gw.url}/admin/rollouts", headers={"Authorization": f"Bearer {a.api_key}"}), 403)
    # the key is never stored in clear
    assert a.api_key not in str(gw.store.get_rollout(a.id)) and gw.store.rollout_key_hash(a.id) != a.api_key


def test_bad_input_is_4xx_and_writes_nothing(make_gateway):
    gw = make_gateway(limits=GatewayLimits(max_body_bytes=2048))
    r = gw.rollout()
    cases = [
        dict(content=b"{not json", headers={"content-type": "application/json"}),
        dict(json=[1, 2]),
        dict(json={"model": "x"}),
        dict(json={"messages": []}),
        dict(json={"messages": [{"content": "no role"}]}),
        dict(json={**CHAT, "max_tokens": -3}),
        dict(json={**CHAT, "n": "two"}),
        dict(json={**CHAT, "stream": "yes"}),
    ]
    for case in cases:
        assert_error(post(gw, r.id, key=r.api_key, **case), 400)
    assert_error(post(gw, r.id, key=r.api_key, json={**CHAT, "pad": "x" * 4000}), 413)
    assert_error(post(gw, r.id, "/v1/completions", key=r.api_key, json={"prompt": ["a", "b"]}), 400)
    refused = gw.store.get_calls(r.id)  # each recorded as refused, the oversize body not kept
    assert [c.status for c in refused] == [CallStatus.REFUSED] * (len(cases) + 2)
    assert refused[-2].error.startswith("413 ") and refused[-2].request == {}
    assert post(gw, r.id, key=r.api_key, json=CHAT).status_code == 200  # still serving


def test_limits_clamp_and_budgets_are_recorded_4xx(make_gateway):
    gw = make_gateway(limits=GatewayLimits(max_tokens_per_call=32, max_calls_per_rollout=3,
                                           max_tokens_per_rollout=25))
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    # more than the cap (and the budget) allows is served with the lower limit, requested vs granted recorded
    ok = c.chat.completions.create(model="m", messages=CHAT["messages"], max_tokens=100)
    assert ok.choices[0].finish_reason == "stop"  # 17 tokens used, 8 left
    first = gw.store.get_calls(r.id)[0]
    assert first.sampling["max_tokens"] == 25 and first.sampling["max_tokens_requested"] == 100
    ok2 = c.chat.completions.create(model="m", messages=CHAT["messages"])  # no max_tokens: what is left
    assert ok2.choices[0].finish_reason == "length"  # clamped to the rollout's remaining 8 tokens
    calls = gw.store.get_calls(r.id)
    assert len(calls[1].completion_token_ids) == 8 and calls[1].sampling["max_tokens"] == 8
    assert "max_tokens_requested" not in calls[1].sampling
    with pytest.raises(openai.BadRequestError, match="token budget"):
        c.chat.completions.create(model="m", messages=CHAT["messages"])
    calls = gw.store.get_calls(r.id)
    assert [x.status for x in calls] == [CallStatus.OK, CallStatus.OK, CallStatus.REFUSED]
    assert "rollout_token_budget" in calls[2].error
    gw2 = make_gateway(limits=GatewayLimits(max_calls_per_rollout=2))
    r2 = gw2.rollout()
    c2 = openai.OpenAI(base_url=r2.base_url, api_key=r2.api_key, max_retries=0)
    for _ in range(2):
        c2.chat.completions.create(model="m", messages=CHAT["messages"])
    with pytest.raises(openai.BadRequestError, match="call budget"):
        c2.chat.completions.create(model="m", messages=CHAT["messages"])
    assert len(gw2.store.get_calls(r2.id)) == 3


def test_finished_rollout_refuses_calls_but_takes_rewards(gw):
    r = gw.rollout()
    assert post(gw, r.id, key=r.api_key, json=CHAT).status_code == 200
    for value, name in [(1.0, "reward"), (0.5, "format")]:
        resp = httpx.post(f"{gw.url}/r/{r.id}/reward", json={"value": value, "name": name, "call_index": 0},
                          headers={"Authorization": f"Bearer {r.api_key}"})
        assert resp.status_code == 201, resp.text
    assert_error(httpx.post(f"{gw.url}/r/{r.id}/reward", json={"value": "high"},
                            headers={"Authorization": f"Bearer {r.api_key}"}), 400)
    assert_error(httpx.post(f"{gw.url}/r/{r.id}/reward", json={"value": 1.0}), 401)
    assert gw.admin.post(f"/admin/rollouts/{r.id}/status", json={"status": "running"}).status_code == 200
    resp = gw.admin.post(f"/admin/rollouts/{r.id}/status", json={"status": "succeeded"})
    assert resp.status_code == 200 and resp.json()["status"] == "succeeded"
    assert_error(post(gw, r.id, key=r.api_key, json=CHAT), 410)
    assert_error(gw.admin.post(f"/admin/rollouts/{r.id}/status", json={"status": "running"}), 409)
    detail = gw.admin.get(f"/admin/rollouts/{r.id}").json()
    assert detail["status"] == "succeeded" and len(detail["calls"]) == 1
    assert detail["calls"][0]["prompt_token_ids"] and detail["calls"][0]["completion_token_ids"]
    assert sorted((x["name"], x["value"]) for x in detail["rewards"]) == [("format", 0.5), ("reward", 1.0)]


def test_admin_rollouts_list_paging_and_failure_kind(gw):
    ids = [gw.rollout(task_id=f"t{i}", group_id="g", step=i % 2, run_id=None).id for i in range(5)]
    page1 = gw.admin.get("/admin/rollouts", params={"limit": 3}).json()
    page2 = gw.admin.get("/admin/rollouts", params={"limit": 3, "offset": 3}).json()
    assert page1["has_more"] and not page2["has_more"]
    assert sorted(x["id"] for x in page1["data"] + page2["data"]) == sorted(ids)
    assert len(gw.admin.get("/admin/rollouts", params={"step": 1}).json()["data"]) == 2
    gw.admin.post(f"/admin/rollouts/{ids[0]}/status", json={"status": "running"})
    resp = gw.admin.post(f"/admin/rollouts/{ids[0]}/status",
                         json={"status": "failed", "failure_kind": "infra", "error": "runner died"})
    assert resp.json()["failure_kind"] == "infra"
    assert gw.store.get_rollout(ids[0]).status == RolloutStatus.FAILED
    assert_error(gw.admin.post(f"/admin/rollouts/{ids[1]}/status", json={"status": "exploded"}), 400)
    assert_error(gw.admin.post("/admin/rollouts", json={"task_id": "t"}), 400)
    assert_error(gw.admin.get("/admin/rollouts/missing"), 404)


def test_redaction_of_stored_secrets(gw):
    r = gw.rollout()
    secret = "sk-" + "A1b2C3d4" * 5
    body = {**CHAT, "messages": [{"role": "user", "content": f"my key is {secret} ok"}]}
    assert post(gw, r.id, key=r.api_key, json=body).status_code == 200
    (call,) = gw.store.get_calls(r.id)
    assert secret not in str(call.request) and "[REDACTED]" in call.request["messages"][0]["content"]
    # no tokenizer for the fake engine's byte tokens: the arrays that held the secret are not stored
    assert call.prompt_token_ids == [] and call.sampling["redacted"]["dropped"]


def test_health_and_metrics(gw):
    r = gw.rollout()
    assert post(gw, r.id, key=r.api_key, json=CHAT).status_code == 200
    assert httpx.get(f"{gw.url}/healthz").json()["ok"] is True
    text = httpx.get(f"{gw.url}/metrics").text
    assert "harnessrl_calls_recorded_total 1" in text and 'harnessrl_engine_healthy{engine="engine-0"} 1' in text
