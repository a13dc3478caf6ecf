"""Fault 3: the PostgreSQL server restarts while gateways record calls.

The test runs its own cluster (``scripts/postgres.sh`` with a separate data folder and port) so that
stopping it disturbs no other test. Under a steady load of streamed and plain calls the server is stopped
for a few seconds and started again: every call the harness saw answered must be in the store exactly once,
calls during the outage are refused with a 503 that says why (or wait and are answered), never a 500 or a
dropped connection, and the same gateway process records again once the server is back.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from harnessrl.store import open_store
from harnessrl.types import CallStatus

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class Cluster:
    """A PostgreSQL cluster of this test's own (``scripts/postgres.sh`` in its own folder and port)."""

    def __init__(self, port: int) -> None:
        self.dir = Path(f"/tmp/harnessrl-faults-pg-{uuid.uuid4().hex[:8]}")
        self.env = {**os.environ, "HARNESSRL_PG_DIR": str(self.dir), "HARNESSRL_PG_PORT": str(port)}

    def run(self, action: str) -> str:
        r = subprocess.run(["bash", str(ROOT / "scripts/postgres.sh"), action], env=self.env, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"postgres.sh {action} failed: {r.stderr[-2000:]}")
        return r.stdout

    def start(self) -> str:
        out = self.run("start")
        return out.strip().split("=", 1)[1]


@pytest.fixture
def cluster():
    from faultkit import free_port

    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        if os.geteuid() != 0:
            pytest.skip("PostgreSQL is not installed and installing it needs root (bash scripts/postgres.sh)")
    c = Cluster(free_port())
    yield c
    subprocess.run(["bash", str(ROOT / "scripts/postgres.sh"), "reset"], env=c.env, capture_output=True, timeout=120)


async def load(rollouts: list[dict], stop: asyncio.Event, log: list[tuple[str, str, str]]) -> None:
    """Each worker calls in a loop until ``stop``; ``log`` gets (marker, outcome, detail)."""

    async def worker(r: dict, k: int) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
            i = 0
            while not stop.is_set():
                i += 1
                marker = f"{r['rollout_id']} w{k} #{i}"
                stream = i % 2 == 0
                body = {"model": "m", "messages": [{"role": "user", "content": marker}], "stream": stream}
                try:
                    async with http.post(f"{r['base_url']}/chat/completions", json=body,
                                         headers={"Authorization": f"Bearer {r['api_key']}"}) as resp:
                        raw = await resp.read()
                except (aiohttp.ClientError, OSError) as exc:
                    log.append((marker, "dropped", repr(exc)))
                    continue
                text = raw.decode()
                if resp.status == 200 and (not stream or ("data: [DONE]" in text and '"error"' not in text)):
                    log.append((marker, "answered", ""))
                elif resp.status == 503 or (resp.status == 200 and '"store_unavailable"' in text):
                    log.append((marker, "refused", text[-400:]))
                    await asyncio.sleep(0.2)
                else:
                    log.append((marker, f"status {resp.status}", text[-400:]))

    await asyncio.gather(*(worker(r, k) for r in rollouts for k in range(2)))


def test_postgres_restart_mid_load_loses_no_answered_call(cluster, gateway_procs, engine_procs):
    url = cluster.start()
    engine = engine_procs("--completion-len", "12")
    gw = gateway_procs(f"{url}?pool_size=4", [engine.url])
    rollouts = [gw.rollout(task_id=f"t{i}") for i in range(6)]
    log: list[tuple[str, str, str]] = []

    async def run() -> float:
        stop = asyncio.Event()
        task = asyncio.create_task(load(rollouts, stop, log))

        async def answered_at_least(n: int) -> None:
            while sum(o == "answered" for _, o, _ in log) < n:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(answered_at_least(60), 60)
        t0 = time.monotonic()
        await asyncio.to_thread(cluster.run, "stop")
        await asyncio.sleep(3)
        await asyncio.to_thread(cluster.start)
        outage = time.monotonic() - t0
        before = sum(o == "answered" for _, o, _ in log)
        await asyncio.wait_for(answered_at_least(before + 60), 90)
        stop.set()
        await task
        return outage

    outage = asyncio.run(run())
    outcomes = collections.Counter(o for _, o, _ in log)
    bad = [(m, o, d) for m, o, d in log if o not in ("answered", "refused")]
    assert not bad, f"{len(bad)} calls neither answered nor refused with a 503 (outcomes {outcomes}): {bad[:3]}"
    for _, o, detail in log:
        if o == "refused":
            assert "store" in detail, detail
    assert gw.proc.poll() is None

    store = open_store(url)
    try:
        stored = collections.Counter()
        for r in rollouts:
            calls = store.get_calls(r["rollout_id"])
            assert [c.index for c in calls] == list(range(len(calls)))
            for c in calls:
                if c.status == CallStatus.OK:
                    stored[c.request["messages"][-1]["content"]] += 1
    finally:
        store.close()
    answered = [m for m, o, _ in log if o == "answered"]
    missing = [(m, stored[m]) for m in answered if stored[m] != 1]
    assert not missing, f"{len(missing)} answered calls not stored exactly once: {missing[:3]}"
    refused = {m for m, o, _ in log if o == "refused"}
    assert not refused & set(stored), "a call refused to the harness is stored as answered"
    print(f"postgres restart: outage {outage:.1f}s, outcomes {dict(outcomes)}")
