"""App keys over real HTTP: created, listed and revoked with the admin API; scoped to one deployment;
never opening rollout routes, the admin API or the dashboard; never written to the store or the log."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import openai
import pytest

from harnessrl.store.sqlite import SqliteStore
from harnessrl.ui import mount_dashboard

BODY = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _post(url: str, path: str, key: str | None, body: dict | None = None, **headers: str) -> httpx.Response:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(url + path, json=body or BODY, headers=headers, timeout=30)


def test_keys_are_created_listed_and_revoked(production) -> None:  # noqa: ANN001
    production.deployment("support")
    web = production.key("support", "web")
    mobile = production.key("support", "mobile")
    assert web.key.startswith("hrl-app-") and web.key != mobile.key
    listed = production.admin.get("/admin/deployments/support/keys").json()["data"]
    assert [(k["id"], k["label"], k["revoked_at"]) for k in listed] == [(web.id, "web", None), (mobile.id, "mobile", None)]
    assert web.key not in str(listed) and not any("hash" in f for k in listed for f in k)
    client = openai.OpenAI(base_url=web.base_url, api_key=web.key, max_retries=0)
    assert client.chat.completions.create(**BODY).choices[0].message.content
    r = production.admin.delete(f"/admin/deployments/support/keys/{web.id}")
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    with pytest.raises(openai.PermissionDeniedError, match="revoked"):
        client.chat.completions.create(**BODY)
    assert _post(production.url, "/p/support/feedback", web.key, {"session_id": "s", "name": "x", "value": 1}) \
        .status_code == 403  # feedback too
    other = openai.OpenAI(base_url=mobile.base_url, api_key=mobile.key, max_retries=0)
    assert other.chat.completions.create(**BODY).choices  # the other key still works
    assert production.admin.delete("/admin/deployments/support/keys/key_nope").status_code == 404
    assert production.admin.post("/admin/deployments/nope/keys", json={}).status_code == 404
    assert production.admin.post("/admin/deployments", json={"name": "support"}).status_code == 409
    assert production.admin.post("/admin/deployments", json={"name": "bad/name"}).status_code == 400
    deps = production.admin.get("/admin/deployments").json()["data"]
    assert [d["name"] for d in deps] == ["support"] and deps[0]["base_url"].endswith("/p/support/v1")


def test_missing_unknown_and_foreign_keys(production) -> None:  # noqa: ANN001
    production.deployment("support")
    production.deployment("billing")
    key = production.key("support")
    url = production.url
    r = _post(url, "/p/support/v1/chat/completions", None)
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
    assert _post(url, "/p/support/v1/chat/completions", "hrl-app-made-up").status_code == 401
    r = _post(url, "/p/billing/v1/chat/completions", key.key)
    assert r.status_code == 403 and "support" in r.json()["error"]["message"]
    r = _post(url, "/p/nope/v1/chat/completions", key.key)
    assert r.status_code == 404 and r.json()["error"]["code"] == "deployment_not_found"
    assert _post(url, "/p/nope/v1/chat/completions", "hrl-app-made-up").status_code == 401  # no name probing
    assert httpx.get(f"{url}/p/billing/v1/models", headers={"x-api-key": key.key}).status_code == 403
    assert httpx.get(f"{url}/p/support/v1/models", headers={"x-api-key": key.key}).status_code == 200
    assert _post(url, "/p/billing/feedback", key.key, {"session_id": "s", "name": "x", "value": 1}).status_code == 403
    assert production.sessions("billing") == [] and production.sessions("support") == []


def test_an_app_key_opens_no_rollout_admin_or_dashboard_route(production) -> None:  # noqa: ANN001
    mount_dashboard(production.gateway)
    production.deployment("support")
    key = production.key("support")
    url = production.url
    assert _post(url, "/p/support/s/s1/v1/chat/completions", key.key).status_code == 200
    (session,) = production.sessions("support")
    rid = session["rollout_id"]
    training = production.admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    for path in (f"/r/{rid}/v1/chat/completions", f"/r/{training['rollout_id']}/v1/chat/completions"):
        r = _post(url, path, key.key)  # not even the rollout of its own session
        assert r.status_code == 403, (path, r.text)
    assert _post(url, f"/r/{rid}/reward", key.key, {"value": 1.0}).status_code == 403
    auth = {"Authorization": f"Bearer {key.key}"}
    for method, path in [("GET", "/admin/deployments"), ("POST", "/admin/deployments"), ("GET", "/admin/rollouts"),
                         ("GET", "/admin/deployments/support/keys"), ("GET", "/admin/deployments/support/sessions"),
                         ("POST", "/admin/deployments/support/keys"), ("POST", "/admin/pause")]:
        r = httpx.request(method, url + path, headers=auth, json={}, timeout=30)
        assert r.status_code == 403, (method, path, r.text)
    for params, headers in [({"token": key.key}, {}), ({}, auth)]:  # the dashboard sends it to its login page
        r = httpx.get(f"{url}/ui/", params=params, headers=headers, timeout=30)
        assert r.status_code == 303 and "/ui/login" in r.headers["location"] and "set-cookie" not in r.headers
    assert httpx.get(f"{url}/ui/", params={"token": production.gateway.admin_token}).headers.get("set-cookie")
    # and a training rollout's key opens no production route
    assert _post(url, "/p/support/v1/chat/completions", training["api_key"]).status_code == 401


def test_keys_reach_neither_the_store_nor_the_log(production, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    production.deployment("support")
    key = production.key("support")
    client = openai.OpenAI(base_url=f"{production.url}/p/support/s/sec-1/v1", api_key=key.key)
    secret = "sk-" + "A1b2C3d4" * 4
    answer = client.chat.completions.create(model="policy", max_tokens=4, messages=[
        {"role": "user", "content": f"my key is {secret}"}])
    assert answer.choices
    (session,) = production.sessions("support")
    (call,) = production.store.get_calls(session["rollout_id"])
    assert secret not in str(call.request) and "[REDACTED]" in str(call.request)  # redacted as in training
    assert key.key not in caplog.text and secret not in caplog.text
    store = production.store
    if isinstance(store, SqliteStore):
        production.server.stop()  # everything committed and checkpointed
        raw = b"".join(p.read_bytes() for p in Path(store.path).parent.glob(Path(store.path).name + "*"))
    else:
        with store._read() as conn:  # every table's rows as text
            tables = [r["tablename"] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()]
            raw = "".join(str(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables).encode()
    assert key.key.encode() not in raw and secret.encode() not in raw
    assert key.key[len("hrl-app-"):].encode() not in raw
