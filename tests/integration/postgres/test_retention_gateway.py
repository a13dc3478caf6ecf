"""Retention end to end on PostgreSQL: a gateway process records, ``harnessrl purge`` (the installed
command) empties the finished rollout, the admin API says ``purged_at``, the open rollout records on."""

from __future__ import annotations

import subprocess
import sys

import httpx


def _purge(db: str, *flags: str) -> str:
    cmd = [sys.executable, "-m", "harnessrl.cli", "purge", "--db", db, "--older-than", "0s", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout


def test_purge_through_the_cli_while_a_gateway_serves(pg_url, engine_server, start_gateway) -> None:
    gw = start_gateway(pg_url, engine_server.url)
    made = [
        httpx.post(f"{gw.url}/admin/rollouts", headers=gw.admin, json={"task_id": "t", "group_id": "g"}).json()
        for _ in range(2)
    ]
    done, open_ = (r["rollout_id"] for r in made)
    keys = {r["rollout_id"]: {"Authorization": f"Bearer {r['api_key']}"} for r in made}

    def chat(rid: str, messages: list[dict]) -> httpx.Response:
        body = {"model": "m", "messages": messages}
        return httpx.post(f"{gw.url}/r/{rid}/v1/chat/completions", json=body, headers=keys[rid], timeout=30)

    messages: list[dict] = []
    for turn in range(3):  # a multi-turn chain: stored prefix-compressed
        messages.append({"role": "user", "content": f"confidential turn {turn}"})
        resp = chat(done, messages)
        assert resp.status_code == 200, resp.text
        messages.append(resp.json()["choices"][0]["message"])
    assert chat(open_, [{"role": "user", "content": "still working"}]).status_code == 200
    reward = httpx.post(f"{gw.url}/r/{done}/reward", json={"value": 1.0}, headers=keys[done])
    assert reward.status_code == 201, reward.text
    for status in ("running", "succeeded"):
        resp = httpx.post(f"{gw.url}/admin/rollouts/{done}/status", headers=gw.admin, json={"status": status})
        assert resp.status_code == 200, resp.text

    dry = _purge(pg_url)
    assert "dry run: would purge 1 rollouts, 3 calls" in dry and "nothing deleted" in dry
    assert httpx.get(f"{gw.url}/admin/rollouts/{done}", headers=gw.admin).json()["purged_at"] is None

    out = _purge(pg_url, "--yes")
    assert "purged 1 rollouts, 3 calls" in out and "PostgreSQL" in out
    row = httpx.get(f"{gw.url}/admin/rollouts/{done}", headers=gw.admin).json()
    assert row["purged_at"] is not None and row["status"] == "succeeded"
    assert [w["value"] for w in row["rewards"]] == [1.0]
    assert len(row["calls"]) == 3
    for call in row["calls"]:
        assert call["purged_at"] == row["purged_at"] and call["status"] == "ok"
        assert (call["request"], call["response"], call["prompt_token_ids"], call["completion_token_ids"]) == (
            {}, None, [], [])  # fmt: skip
    assert "confidential" not in str(row)

    # The rollout that is still open was not touched and records on.
    resp = chat(open_, [{"role": "user", "content": "still working"}, {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": "more"}])  # fmt: skip
    assert resp.status_code == 200 and resp.headers["x-harnessrl-call-index"] == "1"
    live = httpx.get(f"{gw.url}/admin/rollouts/{open_}", headers=gw.admin).json()
    assert live["purged_at"] is None and all(c["prompt_token_ids"] for c in live["calls"])
    assert chat(done, messages).status_code == 410  # a purged rollout is a finished one
