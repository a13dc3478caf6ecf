"""Fault 6: a runaway harness -- a tight loop of calls, 1 MB prompts, a thousand streams it never reads.

The gateway's budgets must stop it (call budget: 400 ``rollout_call_budget``; body limit: 413), a
well-behaved rollout's latency must stay within 2x of what it was before, and the gateway's memory must
stay bounded. Everything is real: the gateway and the engine are processes, the streams are sockets that
send a request and never read a byte.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import orjson
import psutil
import pytest

from harnessrl.store import open_store
from harnessrl.types import CallStatus

pytestmark = pytest.mark.slow

BUDGET = 100  # calls per rollout
BODY_MAX = 512 * 1024
LIMITS = {"gateway": {"limits": {"max_calls_per_rollout": BUDGET, "max_body_bytes": BODY_MAX}}}
LOOP_CALLS, BIG_PROMPTS, SILENT_STREAMS = 2000, 20, 1000


async def call(http: aiohttp.ClientSession, r: dict, text: str, stream: bool = False) -> tuple[int, bytes]:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": stream}
    async with http.post(f"{r['base_url']}/chat/completions", data=orjson.dumps(body),
                         headers={"Authorization": f"Bearer {r['api_key']}",
                                  "content-type": "application/json"}) as resp:
        return resp.status, await resp.read()


async def latencies(r: dict, n: int, tag: str) -> list[float]:
    """A well-behaved harness: one call at a time (its own conversation), latency of each."""
    out = []
    async with aiohttp.ClientSession() as http:
        for i in range(n):
            t = time.perf_counter()
            status, _ = await call(http, r, f"{tag} {i}", stream=i % 2 == 1)
            out.append(time.perf_counter() - t)
            assert status == 200
            await asyncio.sleep(0.02)
    return out


def silent_streams(gw_url: str, rollouts: list[dict], n: int) -> list[socket.socket]:
    """``n`` streamed requests whose client never reads the answer (sockets kept open)."""
    socks = []
    host, port = gw_url.removeprefix("http://").split(":")
    for i in range(n):
        r = rollouts[i % len(rollouts)]
        body = orjson.dumps({"model": "m", "stream": True,
                             "messages": [{"role": "user", "content": f"never read {i}"}]})
        path = r["base_url"].split(port, 1)[1] + "/chat/completions"
        s = socket.create_connection((host, int(port)))
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {r['api_key']}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        socks.append(s)
    return socks


def test_a_runaway_harness_is_stopped_by_budgets_without_hurting_others(tmp_path, engine_procs, gateway_procs):
    engine = engine_procs("--completion-len", "400")  # ~1.5 KB of SSE per stream: kernel buffers hold it
    db = tmp_path / "gw.db"
    gw = gateway_procs(f"sqlite:///{db}", [engine.url], LIMITS)
    proc = psutil.Process(gw.proc.pid)
    good = {phase: gw.rollout(f"good-{phase}") for phase in ("before", "during", "after")}  # 50 calls each
    loop_r = gw.rollout("loop")
    big_r = gw.rollout("big")
    stream_rs = [gw.rollout(f"streams{i}") for i in range(SILENT_STREAMS // BUDGET)]

    asyncio.run(latencies(good["before"], 10, "warm-up"))
    before = asyncio.run(latencies(good["before"], 40, "before"))
    rss0 = proc.memory_info().rss

    spec = {"loop": loop_r, "calls": LOOP_CALLS, "concurrency": 16, "big": big_r, "big_calls": BIG_PROMPTS}
    socks = silent_streams(gw.url, stream_rs, SILENT_STREAMS)
    try:
        time.sleep(1.0)
        flood = subprocess.Popen([sys.executable, str(Path(__file__).with_name("flood.py")), orjson.dumps(spec)],
                                 stdout=subprocess.PIPE, cwd=Path(__file__).parents[2])
        time.sleep(0.5)  # the flood is on when the good rollout calls
        during = asyncio.run(latencies(good["during"], 40, "during"))
        out, _ = flood.communicate(timeout=300)
        counts = orjson.loads(out)
        loop_status = {int(k): v for k, v in counts["loop"].items()}
        big_status = {int(k): v for k, v in counts["big"].items()}
        rss_peak = proc.memory_info().rss
        after = asyncio.run(latencies(good["after"], 40, "after"))
    finally:
        for s in socks:
            s.close()

    normal = statistics.median(before)
    slowed = statistics.median(during)
    print(f"runaway: good rollout median latency {normal * 1000:.1f} ms before, {slowed * 1000:.1f} ms during "
          f"(x{slowed / normal:.2f}), {statistics.median(after) * 1000:.1f} ms after; gateway RSS "
          f"{rss0 / 2**20:.0f} -> {rss_peak / 2**20:.0f} MiB; loop {dict(loop_status)}, big {dict(big_status)}")
    assert loop_status.get(200) == BUDGET and loop_status.get(400) == LOOP_CALLS - BUDGET, loop_status
    assert big_status.get(413) == BIG_PROMPTS, big_status
    assert slowed <= 2 * max(normal, statistics.median(after)), "the runaway slowed a good rollout > 2x"
    assert rss_peak - rss0 < 256 * 2**20, "the gateway's memory grew by more than 256 MiB"
    assert gw.proc.poll() is None

    store = open_store(f"sqlite:///{db}")
    try:
        calls = store.get_calls(loop_r["rollout_id"])
        assert sum(c.status == CallStatus.OK for c in calls) == BUDGET
        assert all("rollout_call_budget" in (c.error or "") for c in calls if c.status != CallStatus.OK)
        served = [c for r in stream_rs for c in store.get_calls(r["rollout_id"])]
        assert len(served) == SILENT_STREAMS  # every unread stream was still recorded (answer or cut off)
    finally:
        store.close()


def responses_call(r: dict, text: str, previous: str | None = None) -> httpx.Response:
    body = {"model": "m", "input": text, "previous_response_id": previous}
    return httpx.post(f"{r['base_url']}/responses", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {r['api_key']}"})


def test_old_previous_response_ids_are_read_back_within_a_budget(tmp_path, engine_procs, gateway_procs):
    """Naming a response no longer kept in memory reads the rollout's recorded calls back: a harness that
    names old ones in a loop is refused once its read-backs used ``max_recall_bytes``."""
    engine = engine_procs()
    gw = gateway_procs(f"sqlite:///{tmp_path / 'gw.db'}", [engine.url],
                       {"gateway": {"limits": {"max_recall_bytes": 40000}}})
    r = gw.rollout("recall")
    ids = []
    for i in range(8):  # a chain: each call continues the last (kept in memory)
        resp = responses_call(r, f"turn {i} " + "x" * 500, ids[-1] if ids else None)
        assert resp.status_code == 200, resp.text
        ids.append(resp.json()["id"])
    statuses = []
    for _ in range(20):  # the oldest, over and over: each time read back from the store
        resp = responses_call(r, "again", ids[0])
        statuses.append(resp.status_code)
        if resp.status_code != 200:
            err = resp.json()["error"]
            assert resp.status_code == 400 and err["code"] == "recall_budget", resp.text
            assert "max_recall_bytes" in err["message"] and err["type"] == "invalid_request_error"
    assert statuses[0] == 200 and statuses[-1] == 400, statuses  # served, then bounded
    assert statuses == sorted(statuses), statuses  # refused from then on
    other = gw.rollout("other")  # the budget is the rollout's: another is served
    assert responses_call(other, "hello").status_code == 200


def test_an_open_rollouts_render_history_is_bounded(tmp_path, engine_procs, gateway_procs):
    """Gateway render mode keeps each call's tokens for the rollout's next prompts: a harness that sends new
    long prompts call after call is refused once its history holds ``max_history_tokens``."""
    engine = engine_procs()
    gw = gateway_procs(f"sqlite:///{tmp_path / 'gw.db'}", [engine.url],
                       {"gateway": {"render_mode": "gateway",
                                    "render": {"tokenizer": "tiny", "max_history_tokens": 3000}}})
    r = gw.rollout("history")
    headers = {"Authorization": f"Bearer {r['api_key']}"}
    statuses = []
    for i in range(30):  # unrelated conversations: nothing is shared, each call's tokens are new
        body = {"model": "m", "messages": [{"role": "user", "content": f"{i} " + "the quick brown fox " * 60}]}
        resp = httpx.post(f"{r['base_url']}/chat/completions", json=body, headers=headers, timeout=30)
        statuses.append(resp.status_code)
        if resp.status_code != 200:
            err = resp.json()["error"]
            assert resp.status_code == 400 and err["code"] == "render_history_budget", resp.text
            assert "max_history_tokens" in err["message"]
    assert 200 in statuses and statuses[-1] == 400, statuses
    assert statuses == sorted(statuses), statuses
    other = gw.rollout("other")
    ok = httpx.post(f"{other['base_url']}/chat/completions", timeout=30,
                    headers={"Authorization": f"Bearer {other['api_key']}"},
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert ok.status_code == 200, ok.text
