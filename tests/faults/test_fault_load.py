"""Fault 9: load is not failure -- a slow engine keeps serving, a stopped one is caught within seconds.

A loaded machine makes an engine slow: answers take longer than the gateway's upstream timeout, first
bytes come late. That engine is alive (it streams, it answers its health check) and must keep serving,
with no attempt made ``infra``. A SIGSTOPped engine is not slow but gone: it must be marked down, and the
call it held failed, within seconds. Real processes: fake engines, the gateway, the controller's runner.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import threading
import time

import httpx
import pytest
from faultkit import collect_one_step, write_fault_config

from harnessrl.gateway.pool import DEAD_AFTER_S
from harnessrl.types import FailureKind, RolloutStatus

pytestmark = pytest.mark.slow

NORMAL_TOKEN_S = 0.01
SLOWED = ("--delay", "2.5", "--completion-len", "20", "--token-delay", str(10 * NORMAL_TOKEN_S))  # ~4.5 s a call
UPSTREAM_TIMEOUT_S = 1.0  # far below a slowed call: the old total-time timeout marked the engine down


def test_an_engine_slowed_tenfold_keeps_serving_with_no_infra_attempt(tmp_path, engine_procs, caplog):
    engine = engine_procs(*SLOWED)  # 2.5 s before the first byte (queued), then ten times slower tokens
    tasks = [{"id": f"t{i}", "input": {"question": f"story {i}"}} for i in range(3)]
    cfg = write_fault_config(tmp_path, [engine.url], {"gateway": {"limits": {"upstream_timeout_s": UPSTREAM_TIMEOUT_S}}},
                             tasks=tasks, max_retries=1)
    stats: dict = {}
    with caplog.at_level(logging.WARNING, logger="harnessrl.gateway"):
        good, everything = asyncio.run(collect_one_step(cfg, stats=stats))
    assert [(r.status, r.failure_kind) for r in everything] == [(RolloutStatus.SUCCEEDED, None)] * 3, \
        [(r.status, r.failure_kind, r.error) for r in everything]
    assert not any(r.failure_kind == FailureKind.INFRA for r in everything)
    assert stats["infra.reruns"] == 0 and len(good) == 3
    assert "marked down" not in caplog.text, caplog.text


def healthy(gw_url: str) -> dict[str, int]:
    text = httpx.get(f"{gw_url}/metrics", timeout=10).text
    return {m[0]: int(m[1]) for m in re.findall(r'harnessrl_engine_healthy\{engine="([^"]+)"\} (\d)', text)}


def test_a_sigstopped_engine_is_marked_down_and_its_call_failed_within_seconds(tmp_path, engine_procs,
                                                                             gateway_procs):
    engine = engine_procs("--completion-len", "400", "--token-delay", "0.05")  # a 20 s stream
    gw = gateway_procs(f"sqlite:///{tmp_path / 'gw.db'}", [engine.url], {"gateway": {"health_interval_s": 0.2}})
    r = gw.rollout()
    first_bytes, ended = threading.Event(), {}

    def stream() -> None:
        with httpx.stream("POST", f"{r['base_url']}/chat/completions", timeout=120,
                          headers={"Authorization": f"Bearer {r['api_key']}"},
                          json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "story"}]}) \
                as resp:
            errors = []
            for line in resp.iter_lines():
                first_bytes.set()
                if '"error"' in line:
                    errors.append(line)
            ended["at"], ended["errors"] = time.monotonic(), errors

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    assert first_bytes.wait(60), "the stream never started"
    assert engine.proc is not None
    engine.proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        limit = DEAD_AFTER_S + 15  # the probe's own deadline, plus slack for a machine at load 10
        while healthy(gw.url).get("engine-0") != 0:
            assert time.monotonic() - stopped < limit, "the stopped engine was not marked down"
            time.sleep(0.2)
        down_after = time.monotonic() - stopped
        reader.join(limit)
        assert "at" in ended, "the call held by the stopped engine did not end"
        assert ended["at"] - stopped < limit and ended["errors"], ended  # ended by an error event, typed
        assert "is down" in ended["errors"][-1], ended
    finally:
        engine.proc.send_signal(signal.SIGCONT)
    print(f"stopped engine marked down after {down_after:.1f}s, its call failed after {ended['at'] - stopped:.1f}s")
    deadline = time.monotonic() + 30  # running again: back in service
    while healthy(gw.url).get("engine-0") != 1:
        assert time.monotonic() < deadline, "the engine did not come back after SIGCONT"
        time.sleep(0.2)
    again = httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                       json={"model": "m", "messages": [{"role": "user", "content": "again"}]}, timeout=60)
    assert again.status_code == 200, again.text
