"""Fault 1: an engine is SIGKILLed in the middle of a streamed answer.

Real processes: two fake engines (each its own process, slow streams), the gateway process, and an
HTTP client reading the stream. The harness must get a clean, typed error quickly (never a hang), the call
must be recorded as failed with the tokens streamed before the kill, and the rollout's next call must be
served by the surviving engine. With one engine, calls fail clearly while it is down and succeed again
once it is back on its port.
"""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import orjson
import pytest
from faultkit import collect_one_step, write_fault_config

from harnessrl.store import open_store
from harnessrl.types import CallStatus, FailureKind, RolloutStatus

pytestmark = pytest.mark.slow

SLOW = ("--completion-len", "60", "--token-delay", "0.05")  # a 3 s stream


def outstanding(gw_url: str) -> dict[str, int]:
    text = httpx.get(f"{gw_url}/metrics", timeout=5).text
    return {m[0]: int(m[1]) for m in re.findall(r'harnessrl_engine_outstanding\{engine="([^"]+)"\} (\d+)', text)}


def stream_until_killed(r: dict, engines: dict, text: str) -> tuple[list[str], bytes, float, str]:
    """Stream a chat answer; after 5 content chunks SIGKILL the engine serving it. Returns
    (content pieces read, the final event, seconds from kill to the end of the stream, killed engine)."""
    pieces, last, killed_at, killed = [], b"", None, ""
    with httpx.stream("POST", f"{r['base_url']}/chat/completions",
                      headers={"Authorization": f"Bearer {r['api_key']}"}, timeout=httpx.Timeout(30),
                      json={"model": "m", "messages": [{"role": "user", "content": text}], "stream": True}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if not line.startswith("data: "):
                continue
            last = line[6:].encode()
            if last == b"[DONE]":
                break
            ev = orjson.loads(last)
            if "error" in ev:
                break
            content = ev["choices"][0]["delta"].get("content")
            if content:
                pieces.append(content)
            if len(pieces) == 5 and killed_at is None:
                busy = [e for e, n in outstanding(r["gw"]).items() if n > 0]
                assert len(busy) == 1, busy
                killed = busy[0]
                engines[killed].kill()
                killed_at = time.monotonic()
    assert killed_at is not None
    return pieces, last, time.monotonic() - killed_at, killed


def test_engine_sigkilled_mid_stream_fails_the_call_cleanly_and_the_next_goes_elsewhere(
        tmp_path, engine_procs, gateway_procs):
    e1, e2 = engine_procs(*SLOW), engine_procs(*SLOW)
    db = tmp_path / "gw.db"
    gw = gateway_procs(f"sqlite:///{db}", [e1.url, e2.url], {"gateway": {"health_interval_s": 0.2}})
    r = {**gw.rollout(), "gw": gw.url}
    engines = {"engine-0": e1, "engine-1": e2}  # the gateway names engines in the order it was given them

    pieces, last, took, killed = stream_until_killed(r, engines, "tell me a long story")
    assert took < 2.0, f"the stream ended {took:.1f}s after the engine died"
    err = orjson.loads(last)["error"]
    assert "mid-stream" in err["message"] and err["type"] == "upstream_error", err

    nxt = httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                     json={"model": "m", "messages": [{"role": "user", "content": "again"}]}, timeout=30)
    assert nxt.status_code == 200, nxt.text

    store = open_store(f"sqlite:///{db}")
    try:
        first, second = store.get_calls(r["rollout_id"])
    finally:
        store.close()
    assert first.status == CallStatus.ERROR and "failed mid-stream" in first.error
    streamed = "".join(pieces).encode()
    assert bytes(t for t in first.completion_token_ids if t < 256).startswith(streamed), \
        "the failed call does not hold what was streamed"
    assert second.status == CallStatus.OK and second.engine_id != first.engine_id
    assert killed == first.engine_id


def test_the_only_engine_dies_calls_fail_fast_then_resume_when_it_is_back(tmp_path, engine_procs, gateway_procs):
    e1 = engine_procs(*SLOW)
    db = tmp_path / "gw.db"
    gw = gateway_procs(f"sqlite:///{db}", [e1.url], {"gateway": {"health_interval_s": 0.2}})
    r = {**gw.rollout(), "gw": gw.url}
    engines = {"engine-0": e1}
    _, last, took, _ = stream_until_killed(r, engines, "story")
    assert took < 2.0 and b"error" in last

    t0 = time.monotonic()
    down = httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                      json={"model": "m", "messages": [{"role": "user", "content": "while down"}]}, timeout=30)
    assert time.monotonic() - t0 < 5.0, "a call with no engine alive waited too long"
    assert down.status_code == 503, down.text
    assert down.json()["error"]["code"] == "no_engine_available"

    engine_procs(*SLOW, port=e1.port)  # the engine restarts on its port
    deadline = time.monotonic() + 10
    while True:
        back = httpx.post(f"{r['base_url']}/chat/completions",
                          headers={"Authorization": f"Bearer {r['api_key']}"},
                          json={"model": "m", "messages": [{"role": "user", "content": "back"}]}, timeout=30)
        if back.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert back.status_code == 200, back.text


def test_the_controller_classifies_an_engine_death_as_infra_and_reruns_the_attempt(tmp_path, engine_procs):
    e1, e2 = engine_procs(*SLOW), engine_procs(*SLOW)
    engines = {"engine-0": e1, "engine-1": e2}

    def kill_the_busy_engine(gw_url: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = [e for e, n in outstanding(gw_url).items() if n > 0]
            if busy:
                time.sleep(0.5)  # some tokens reach the harness first
                engines[busy[0]].kill()
                return
            time.sleep(0.02)

    good, everything = asyncio.run(collect_one_step(write_fault_config(tmp_path, [e1.url, e2.url]),
                                                    during=kill_the_busy_engine))
    assert len(everything) == 2, [(r.status, r.failure_kind, r.error) for r in everything]
    failed = [r for r in everything if r.failure_kind == FailureKind.INFRA]
    assert len(failed) == 1 and "failed on the serving side" in failed[0].error, everything
    assert "mid-stream" in failed[0].error
    assert len(good) == 1 and good[0].status == RolloutStatus.SUCCEEDED and good[0].id != failed[0].id
