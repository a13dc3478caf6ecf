"""Soak: a long run of mixed calls through one gateway process, on SQLite and on PostgreSQL.

Each store gets the same workload: ``--calls`` calls from ``--concurrency`` clients over ``--rollouts``
rollouts, every rollout a multi-turn conversation (restarted every ``--turns`` turns) in one API -- OpenAI
chat, Anthropic Messages or OpenAI Responses, a third each -- alternating streamed and plain answers. The
engine is the fake vLLM (tests/fakes/fake_engine.py, its own process); the gateway is ``harnessrl gateway``
(its own process, whose RSS is sampled). Reported over time: throughput, p50/p99 latency, gateway RSS;
at the end: the RSS slope over the last half of the calls (KB per call: a leak shows here), the store's
size per call, and the count check -- every call the client saw answered is in the store exactly once.

    .venv/bin/python benchmarks/soak.py --calls 100000            # SQLite, then PostgreSQL if available
    .venv/bin/python benchmarks/soak.py --calls 5000 --stores sqlite
    eval "$(bash scripts/postgres.sh)"   # PostgreSQL: HARNESSRL_TEST_POSTGRES_URL (or --pg-url)

Exit status 1 when the count check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "soak-admin-token"
APIS = ("chat", "messages", "responses")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


# -- one conversation per rollout, in its API's wire format ------------------------------------------------
@dataclass
class Conversation:
    rollout_id: str
    api_key: str
    base_url: str
    api: str
    turns: list[tuple[str, str]] = field(default_factory=list)  # (user text, assistant text)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def body(self, user: str, stream: bool) -> tuple[str, dict]:
        history: list[dict] = []
        for u, a in self.turns:
            history += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        history.append({"role": "user", "content": user})
        if self.api == "chat":
            return "/chat/completions", {"model": "policy", "messages": history, "stream": stream,
                                         "max_tokens": 64}
        if self.api == "messages":
            return "/messages", {"model": "policy", "messages": history, "stream": stream, "max_tokens": 64}
        return "/responses", {"model": "policy", "input": history, "stream": stream, "max_output_tokens": 64}

    def answer(self, data: dict) -> str:
        if self.api == "chat":
            return data["choices"][0]["message"]["content"] or ""
        if self.api == "messages":
            return "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
        return "".join(c.get("text", "") for o in data["output"] if o.get("type") == "message"
                       for c in o.get("content", []))


def read_stream(api: str, raw: bytes) -> str | None:
    """The streamed answer's text, or None when the stream did not end as a whole answer."""
    parts, done = [], False
    for line in raw.split(b"\n"):
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            done = api == "chat"
            continue
        ev = orjson.loads(data)
        if "error" in ev and (api != "responses" or ev.get("type") == "error"):
            return None
        if api == "chat":
            for ch in ev.get("choices") or ():
                parts.append((ch.get("delta") or {}).get("content") or "")
        elif api == "messages":
            if ev.get("type") == "content_block_delta" and ev["delta"].get("type") == "text_delta":
                parts.append(ev["delta"]["text"])
            done = done or ev.get("type") == "message_stop"
        else:
            if ev.get("type") == "response.output_text.delta":
                parts.append(ev["delta"])
            done = done or ev.get("type") == "response.completed"
    return "".join(parts) if done else None


# -- the load --------------------------------------------------------------------------------------------
@dataclass
class Stats:
    answered: list[str] = field(default_factory=list)  # markers of calls answered whole
    failed: collections.Counter = field(default_factory=collections.Counter)
    window: list[float] = field(default_factory=list)  # latencies since the last sample
    all_latencies: list[float] = field(default_factory=list)


async def one_call(http: aiohttp.ClientSession, conv: Conversation, n: int, turns: int, stats: Stats) -> None:
    async with conv.lock:  # a conversation is sequential, like a harness's
        if len(conv.turns) >= turns:
            conv.turns.clear()
        marker = f"{conv.rollout_id}:{n}"
        stream = n % 2 == 1
        path, body = conv.body(f"{marker} next step, please. " * 2, stream)
        t = time.perf_counter()
        try:
            async with http.post(conv.base_url + path, data=orjson.dumps(body),
                                 headers={"Authorization": f"Bearer {conv.api_key}",
                                          "content-type": "application/json"}) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, OSError) as exc:
            stats.failed[type(exc).__name__] += 1
            return
        latency = time.perf_counter() - t
        if status != 200:
            stats.failed[f"HTTP {status}"] += 1
            return
        text = read_stream(conv.api, raw) if stream else conv.answer(orjson.loads(raw))
        if text is None:
            stats.failed["broken stream"] += 1
            return
        conv.turns.append((body_user(conv, body), text))
        stats.answered.append(marker)
        stats.window.append(latency)
        stats.all_latencies.append(latency)


def body_user(conv: Conversation, body: dict) -> str:
    msgs = body["messages"] if "messages" in body else body["input"]
    return msgs[-1]["content"]


async def drive(convs: list[Conversation], calls: int, concurrency: int, turns: int, stats: Stats,
                renew: tuple[int, str, list[Conversation]] | None = None) -> None:
    """``calls`` calls over the live conversations. ``renew`` = (calls per rollout, gateway URL, every
    conversation so far): a rollout that has had its calls is closed (``succeeded``) and a new one takes its
    slot, as a run's attempts come and go."""
    counter = iter(range(calls))
    per_rollout = collections.Counter()
    admin = {"Authorization": f"Bearer {ADMIN}"}

    async def replace(http: aiohttp.ClientSession, slot: int) -> None:
        n, gw, everything = renew  # type: ignore[misc]
        old = convs[slot]
        async with old.lock:
            for status in ("running", "succeeded"):  # queued -> running -> succeeded, as a runner reports
                async with http.post(f"{gw}/admin/rollouts/{old.rollout_id}/status", headers=admin,
                                     json={"status": status}) as resp:
                    if resp.status != 200:
                        raise RuntimeError(f"closing rollout {old.rollout_id}: {resp.status} {await resp.text()}")
        async with http.post(f"{gw}/admin/rollouts", headers=admin,
                             json={"task_id": "t", "group_id": f"g{len(everything)}"}) as resp:
            r = orjson.loads(await resp.read())
        convs[slot] = Conversation(r["rollout_id"], r["api_key"], r["base_url"], old.api)
        everything.append(convs[slot])

    async def worker(k: int) -> None:
        mine = list(range(k, len(convs), concurrency))  # each slot has one client: conversations stay sequential
        i = 0
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1),
                                         timeout=aiohttp.ClientTimeout(total=120)) as http:
            for _ in counter:
                slot = mine[i % len(mine)]
                conv = convs[slot]
                i += 1
                per_rollout[conv.rollout_id] += 1
                await one_call(http, conv, per_rollout[conv.rollout_id], turns, stats)
                if renew is not None and per_rollout[conv.rollout_id] == renew[0] and convs[slot] is conv:
                    await replace(http, slot)

    await asyncio.gather(*(worker(k) for k in range(min(concurrency, len(convs)))))


# -- one store -------------------------------------------------------------------------------------------
def store_bytes(url: str, db: Path | None) -> int:
    if db is not None:
        return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    import psycopg

    base, _, query = url.partition("?")
    schema = dict(kv.split("=", 1) for kv in query.split("&"))["schema"]
    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute("SELECT COALESCE(SUM(pg_total_relation_size(format('%%I.%%I', schemaname, tablename))), 0)"
                           " FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    return int(row[0])


def soak(label: str, url: str, db: Path | None, engine_url: str, args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    log = (workdir / f"gateway-{label}.log").open("wb")
    cfg = workdir / f"gateway-{label}.toml"
    cfg.write_text(f"[gateway.limits]\nmax_calls_per_rollout = {args.calls}\n")
    proc = subprocess.Popen([sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway",
                             "--engine", engine_url, "--db", url, "--port", str(port), "--config", str(cfg)],
                            env={**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN,
                                 **dict(kv.split("=", 1) for kv in args.gateway_env)}, stdout=subprocess.DEVNULL,
                            stderr=log)
    gw = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{gw}/v1/models", proc, "gateway")
        ps = psutil.Process(proc.pid)
        admin = {"Authorization": f"Bearer {ADMIN}"}
        convs = []
        with httpx.Client(timeout=30) as client:
            for i in range(args.rollouts):
                r = client.post(f"{gw}/admin/rollouts", headers=admin,
                                json={"task_id": f"t{i % 50}", "group_id": f"g{i % 50}"}).json()
                convs.append(Conversation(r["rollout_id"], r["api_key"], r["base_url"], APIS[i % 3]))
        stats = Stats()
        everything = list(convs)
        renew = (args.rollout_calls, gw, everything) if args.rollout_calls else None
        samples: list[dict] = []
        t0 = time.perf_counter()
        rss0 = ps.memory_info().rss

        async def run() -> None:
            load = asyncio.create_task(drive(convs, args.calls, args.concurrency, args.turns, stats, renew))
            last_n, last_t = 0, t0
            while not load.done():
                await asyncio.wait({load}, timeout=args.sample_s)
                now = time.perf_counter()
                n = len(stats.answered)
                window, stats.window = stats.window, []
                q = statistics.quantiles(window, n=100) if len(window) >= 2 else [float("nan")] * 99
                samples.append({"t": round(now - t0, 1), "calls": n, "rate": round((n - last_n) / (now - last_t), 1),
                                "p50_ms": round(q[49] * 1000, 1), "p99_ms": round(q[98] * 1000, 1),
                                "rss_mib": round(ps.memory_info().rss / 2**20, 1)})
                s = samples[-1]
                print(f"  [{label}] {s['t']:7.1f}s {n:7d} calls {s['rate']:7.1f}/s p50 {s['p50_ms']:6.1f} ms "
                      f"p99 {s['p99_ms']:7.1f} ms rss {s['rss_mib']:6.1f} MiB", flush=True)
                last_n, last_t = n, now
            await load

        asyncio.run(run())
        elapsed = time.perf_counter() - t0
        rss_end = ps.memory_info().rss
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()

    # the count check: every answered call recorded exactly once (read from the store after the gateway exits)
    from harnessrl.store import open_store
    from harnessrl.types import CallStatus

    store = open_store(url)
    try:
        recorded: collections.Counter = collections.Counter()
        other = 0
        for conv in everything:
            for c in store.get_calls(conv.rollout_id):
                if c.status == CallStatus.OK:
                    msgs = c.request.get("messages") or c.request.get("input")
                    recorded[msgs[-1]["content"].split(" ", 1)[0]] += 1
                else:
                    other += 1
    finally:
        store.close()
    answered = collections.Counter(stats.answered)
    missing = [m for m in answered if recorded[m] != 1]
    size = store_bytes(url, db)
    half = [s for s in samples if s["calls"] >= len(stats.answered) / 2]
    slope = float("nan")
    if len(half) >= 3:
        xs, ys = [s["calls"] for s in half], [s["rss_mib"] * 1024 for s in half]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")
    lat = sorted(stats.all_latencies)
    return {
        "store": label, "rollouts": len(everything), "calls": len(stats.answered), "failed": dict(stats.failed), "seconds": round(elapsed, 1),
        "throughput": round(len(stats.answered) / elapsed, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 1), "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1),
        "rss_start_mib": round(rss0 / 2**20, 1), "rss_end_mib": round(rss_end / 2**20, 1),
        "rss_slope_kb_per_call_last_half": round(slope, 4),
        "store_bytes": size, "store_bytes_per_call": round(size / max(1, sum(recorded.values()) + other)),
        "recorded_ok": sum(recorded.values()), "recorded_other": other,
        "count_check": "ok" if not missing and sum(recorded.values()) == len(answered) else
        f"FAILED: {len(missing)} answered calls not recorded exactly once (e.g. {missing[:3]})",
        "samples": samples,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rollouts", type=int, default=500)
    ap.add_argument("--turns", type=int, default=20, help="turns before a rollout's conversation restarts")
    ap.add_argument("--rollout-calls", type=int, default=0,
                    help="close a rollout after this many calls and open a new one in its slot (0: never; "
                    "the --rollouts stay open the whole run)")
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--pg-url", default=os.environ.get("HARNESSRL_TEST_POSTGRES_URL"))
    ap.add_argument("--sample-s", type=float, default=10.0)
    ap.add_argument("--gateway-env", action="append", default=[], metavar="KEY=VALUE",
                    help="set in the gateway's environment (e.g. MALLOC_ARENA_MAX=2); repeatable")
    ap.add_argument("--out", type=Path, help="write the results (with the time series) as JSON here")
    args = ap.parse_args()

    engine_port = free_port()
    engine = subprocess.Popen([sys.executable, str(ROOT / "tests/fakes/fake_engine.py"), "--port", str(engine_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = []
    try:
        wait_http(f"http://127.0.0.1:{engine_port}/health", engine, "fake engine")
        engine_url = f"http://127.0.0.1:{engine_port}/v1"
        with tempfile.TemporaryDirectory(prefix="harnessrl-soak-") as tmp:
            workdir = Path(tmp)
            for label in args.stores.split(","):
                print(f"soak on {label}: {args.calls} calls, {args.concurrency} concurrent, {args.rollouts} rollouts",
                      flush=True)
                if label == "sqlite":
                    db = workdir / "soak.db"
                    results.append(soak(label, f"sqlite:///{db}", db, engine_url, args, workdir))
                elif label == "postgresql":
                    if not args.pg_url:
                        print("  skipped: no PostgreSQL (eval \"$(bash scripts/postgres.sh)\" or --pg-url)")
                        continue
                    schema = f"soak_{uuid.uuid4().hex[:8]}"
                    url = f"{args.pg_url}{'&' if '?' in args.pg_url else '?'}schema={schema}"
                    try:
                        results.append(soak(label, url, None, engine_url, args, workdir))
                    finally:
                        import psycopg

                        with psycopg.connect(args.pg_url, autocommit=True) as conn:
                            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                else:
                    raise SystemExit(f"unknown store {label!r}: sqlite or postgresql")
    finally:
        engine.terminate()
        engine.wait(timeout=30)

    print("\nstore       calls  calls/s  p50 ms  p99 ms  RSS start->end MiB  slope KB/call (last half)  "
          "bytes/call  count check")
    for r in results:
        print(f"{r['store']:10s} {r['calls']:6d} {r['throughput']:8.1f} {r['p50_ms']:7.1f} {r['p99_ms']:7.1f} "
              f"{r['rss_start_mib']:8.1f} -> {r['rss_end_mib']:6.1f} {r['rss_slope_kb_per_call_last_half']:14.4f}"
              f"{r['store_bytes_per_call']:19d}  {r['count_check']}  failed {r['failed']}")
    if len(results) == 2:
        a, b = results
        print(f"ratio {b['store']}/{a['store']}: throughput x{b['throughput'] / a['throughput']:.2f}, "
              f"p99 x{b['p99_ms'] / a['p99_ms']:.2f}, bytes/call x{b['store_bytes_per_call'] / a['store_bytes_per_call']:.2f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0 if all(r["count_check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
