"""Production-mode overhead: the same chat call direct, through a rollout route, through production routes.

One invocation, one gateway process (``harnessrl gateway --mode production``, durable SQLite recording)
in front of the fast fake engine (tests/fakes/fake_engine.py). Targets, measured in interleaved rounds
so that load drift on a shared machine hits all of them alike:

- ``direct``: the engine itself;
- ``rollout``: ``/r/<rollout>/v1`` (training mode's route: 32 rollouts);
- ``session path``: ``/p/bench/s/<session>/v1`` (32 recorded sessions named in the URL);
- ``session header``: ``/p/bench/v1`` + ``X-Session-Id`` (32 recorded sessions);
- ``session prefix``: ``/p/bench/v1`` without a session id (32 conversations, the gateway derives the id);
- ``unrecorded``: ``/p/bench-unrec/s/<session>/v1`` with ``record_fraction = 0`` (served, nothing stored).

Calls go round-robin over each target's 32 rollouts or sessions. Prints p50/p99, throughput, the latency
added over direct, each production target's ratio to the rollout route, and the gateway's CPU per call.

    .venv/bin/python benchmarks/production_overhead.py [--n1 300] [--n32 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_overhead import BODY, cpu_s, free_port, pct, post_json, start_engine, stop, wait_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / ".bench"
ADMIN = "bench-admin-token"
WORKERS = 32
CONFIG = """
[gateway]
mode = "production"
[production.deployments.bench]
[production.deployments.bench-unrec]
record_fraction = 0.0
"""


@dataclass
class Target:
    name: str
    requests: list[tuple[str, dict[str, str], bytes]]  # round-robin: (URL, headers, body)
    samples: dict[int, list[float]] = field(default_factory=lambda: {1: [], 32: []})
    walls: dict[int, float] = field(default_factory=lambda: {1: 0.0, 32: 0.0})
    cpu: dict[int, float] = field(default_factory=lambda: {1: 0.0, 32: 0.0})


def start_gateway(engine: str) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    db = BENCH / "production-bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    config = BENCH / "production-bench.toml"
    config.write_text(CONFIG)
    env = {**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen([sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway",
                             "--config", str(config), "--engine", engine, "--db", f"sqlite:///{db}",
                             "--port", str(port)], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    wait_http(f"{base}/healthz", proc)
    return proc, base, db


def targets(engine: str, base: str) -> list[Target]:
    body = orjson.dumps(BODY)
    json = {"Content-Type": "application/json"}
    out = [Target("direct", [(f"{engine}/chat/completions", json, body)])]
    rollouts = []
    for i in range(WORKERS):
        r = post_json(f"{base}/admin/rollouts", {"task_id": f"bench-{i}", "group_id": "bench"}, ADMIN)
        rollouts.append((f"{r['base_url']}/chat/completions", {**json, "Authorization": f"Bearer {r['api_key']}"}, body))
    out.append(Target("rollout", rollouts))
    keys = {d: post_json(f"{base}/admin/deployments/{d}/keys", {"label": "bench"}, ADMIN)["api_key"]
            for d in ("bench", "bench-unrec")}
    auth = {**json, "Authorization": f"Bearer {keys['bench']}"}
    out.append(Target("session path", [(f"{base}/p/bench/s/path-{i}/v1/chat/completions", auth, body)
                                       for i in range(WORKERS)]))
    out.append(Target("session header", [(f"{base}/p/bench/v1/chat/completions", {**auth, "X-Session-Id": f"hdr-{i}"},
                                          body) for i in range(WORKERS)]))
    prefix = []
    for i in range(WORKERS):  # 32 conversations: each its own first user message
        b = {**BODY, "messages": [BODY["messages"][0], {"role": "user", "content": f"#{i} {BODY['messages'][1]['content']}"}]}
        prefix.append((f"{base}/p/bench/v1/chat/completions", auth, orjson.dumps(b)))
    out.append(Target("session prefix", prefix))
    unrec = {**json, "Authorization": f"Bearer {keys['bench-unrec']}"}
    out.append(Target("unrecorded", [(f"{base}/p/bench-unrec/s/u-{i}/v1/chat/completions", unrec, body)
                                     for i in range(WORKERS)]))
    return out


async def load(target: Target, concurrency: int, total: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    counter = iter(range(total))
    turn = itertools.cycle(target.requests)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     skip_auto_headers=("User-Agent",)) as http:

        async def worker() -> None:
            for _ in counter:
                url, headers, body = next(turn)
                t0 = time.perf_counter()
                async with http.post(url, data=body, headers=headers) as resp:
                    data = await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"{target.name}: HTTP {resp.status}: {data[:300]!r}")
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n1", type=int, default=300, help="requests per round at concurrency 1")
    ap.add_argument("--n32", type=int, default=2000, help="requests per round at concurrency 32")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over all targets")
    args = ap.parse_args()
    BENCH.mkdir(exist_ok=True)
    print(f"workload: chat, {len(orjson.dumps(BODY['messages']))}-byte messages, 16 tokens back, logprobs + "
          f"return_token_ids; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    engine_proc, engine = start_engine()
    proc = None
    try:
        proc, base, db = start_gateway(engine)
        ts = targets(engine, base)
        for t in ts:
            asyncio.run(load(t, 4, 64))  # warm-up: connections, sessions opened, lazily imported paths
        for _ in range(args.rounds):
            for conc, n in ((1, args.n1), (32, args.n32)):
                for t in ts:
                    pid = engine_proc.pid if t.name == "direct" else proc.pid
                    c0 = cpu_s(pid)
                    lat, wall = asyncio.run(load(t, conc, n))
                    t.cpu[conc] += cpu_s(pid) - c0
                    t.samples[conc] += lat
                    t.walls[conc] += wall
        stop(proc)
        proc = None
        stored = stored_calls(db)
    finally:
        if proc is not None:
            stop(proc)
        stop(engine_proc)
    report(ts, stored, 64 + args.rounds * (args.n1 + args.n32))


def stored_calls(db: Path) -> dict[str, int]:
    """Calls in the store per route family: rollout (training), bench's sessions, bench-unrec's sessions."""
    sys.path.insert(0, str(ROOT))
    from harnessrl.store import open_store

    store = open_store(f"sqlite:///{db}")
    try:
        out = {"rollout": 0}
        for d in store.list_deployments():
            out[d.name] = sum(len(store.get_calls(r.id)) for r in store.iter_rollouts(run_id=d.run_id))
        out["rollout"] = sum(len(store.get_calls(r.id)) for r in store.iter_rollouts() if r.run_id is None)
        return out
    finally:
        store.close()


def report(ts: list[Target], stored: dict[str, int], per_target: int) -> None:
    stats = {t.name: {c: {"p50": statistics.median(t.samples[c]) * 1e3, "p99": pct(t.samples[c], 0.99) * 1e3,
                          "rps": len(t.samples[c]) / t.walls[c], "cpu_ms": t.cpu[c] * 1e3 / len(t.samples[c])}
                      for c in (1, 32)} for t in ts}
    direct, rollout = stats["direct"], stats["rollout"]
    print(f"\n{'target':16s} {'conc':>4s} {'p50 ms':>8s} {'p99 ms':>8s} {'req/s':>8s} {'added p50 ms':>13s} "
          f"{'p50 / rollout':>14s} {'req/s / rollout':>16s} {'CPU ms/call':>12s}")
    for name, s in stats.items():
        for c in (1, 32):
            m = s[c]
            print(f"{name:16s} {c:4d} {m['p50']:8.2f} {m['p99']:8.2f} {m['rps']:8.1f} {m['p50'] - direct[c]['p50']:13.2f} "
                  f"{m['p50'] / rollout[c]['p50']:13.2f}x {m['rps'] / rollout[c]['rps']:15.2f}x {m['cpu_ms']:12.3f}")
    print("(CPU ms/call: the gateway process's own CPU per call; for 'direct', the engine's)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (on a shared machine latency varies)")
    print(f"stored calls: rollout route {stored['rollout']}, recorded sessions (3 targets) {stored.get('bench', 0)} "
          f"of {3 * per_target} served, unrecorded sessions {stored.get('bench-unrec', 0)} of {per_target} served")


if __name__ == "__main__":
    main()
