"""Crash safety: SIGKILL the gateway process under load; every response a client received is stored.

The gateway runs as a real subprocess (``python -m harnessrl.cli gateway``) so that the kill is a real
crash: no shutdown hook runs, only what was committed before each response survives.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import orjson
from fakes.fake_engine import END

from harnessrl.store import open_store
from harnessrl.types import CallStatus

ADMIN = "crash-admin-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(db: Path, engine_url: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway", "--engine", engine_url,
         "--db", f"sqlite:///{db}", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode())
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gateway did not start")


async def load(rollouts: list[dict], received: list[tuple[str, str, int | None]], stop_after: int) -> None:
    """Clients that call until the gateway dies; a response counts only once complete."""

    async def worker(r: dict, k: int) -> None:
        async with aiohttp.ClientSession() as http:
            i = 0
            while True:
                i += 1
                marker = f"{r['rollout_id']} w{k} #{i}"
                stream = i % 2 == 0
                body = {"model": "m", "messages": [{"role": "user", "content": marker}], "stream": stream}
                try:
                    async with http.post(f"{r['base_url']}/chat/completions", json=body,
                                         headers={"Authorization": f"Bearer {r['api_key']}"}) as resp:
                        if resp.status != 200:
                            return
                        if not stream:
                            data = orjson.loads(await resp.read())
                            received.append((marker, data["choices"][0]["message"]["content"],
                                             int(resp.headers["x-harnessrl-call-index"])))
                            continue
                        parts, done = [], False
                        async for line in resp.content:
                            if line.startswith(b"data: [DONE]"):
                                done = True
                            elif line.startswith(b"data: "):
                                ch = orjson.loads(line[6:])
                                parts.append(ch["choices"][0]["delta"].get("content") or "")
                        if done:
                            received.append((marker, "".join(parts), None))
                except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                    return  # the gateway was killed

    tasks = [asyncio.create_task(worker(r, k)) for r in rollouts for k in range(4)]
    while len(received) < stop_after:
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks)


def test_sigkill_under_load_loses_no_answered_call(tmp_path, engine_server):
    db = tmp_path / "crash.db"
    port = free_port()
    proc = start(db, engine_server.url, port)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    rollouts = [httpx.post(f"http://127.0.0.1:{port}/admin/rollouts", headers=admin,
                           json={"task_id": f"t{i}", "group_id": "g"}).json() for i in range(8)]
    received: list[tuple[str, str, int | None]] = []

    async def run() -> None:
        killer = asyncio.get_running_loop().run_in_executor(None, _kill_when, proc, received, 80)
        await load(rollouts, received, stop_after=80)
        await killer

    asyncio.run(run())
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert len(received) >= 80

    store = open_store(f"sqlite:///{db}")
    try:
        stored = {}
        for r in rollouts:
            for c in store.get_calls(r["rollout_id"]):
                assert c.status == CallStatus.OK
                stored[c.request["messages"][-1]["content"]] = c
        for marker, content, index in received:
            assert marker in stored, f"answered call {marker!r} missing after the crash"
            call = stored[marker]
            assert call.completion_token_ids == [*content.encode(), END]
            if index is not None:
                assert call.index == index
    finally:
        store.close()

    # the restarted gateway continues the same rollouts from the store
    proc = start(db, engine_server.url, port)
    try:
        r = rollouts[0]
        resp = httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                          json={"model": "m", "messages": [{"role": "user", "content": "after"}]})
        assert resp.status_code == 200
        before = sum(1 for m, _, _ in received if m.startswith(r["rollout_id"] + " "))
        assert int(resp.headers["x-harnessrl-call-index"]) >= before
    finally:
        proc.kill()
        proc.wait()


def _kill_when(proc: subprocess.Popen, received: list, n: int) -> None:
    while len(received) < n:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
