"""The gateway's own CPU per call, for every API it serves, and where that CPU goes.

One invocation: the fast fake engine (tests/fakes/fake_engine.py, 16 tokens back) behind a real
``harnessrl gateway`` process with durable SQLite recording, loaded by raw aiohttp at concurrency 8 with each
API in turn -- chat completions, completions, Anthropic Messages, Responses, Gemini generateContent,
each not streamed and streamed -- printing the gateway process's CPU milliseconds per call (user + system,
from /proc: robust to other load on a shared machine, unlike latency). That table is the guard: an
ordinary call that gets dearer shows up here, per API.

``--profile DIR`` also samples the gateway with py-spy (``pip install py-spy``; needs ptrace, e.g. root)
while the plain and the streamed chat loads run, writes the folded stacks there and prints the functions
with the most samples: by self time, and inclusive for harnessrl's own functions.

    .venv/bin/python benchmarks/gateway_profile.py [--n 1500] [--profile .bench/profile [--rate 1000]]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_overhead import (  # noqa: E402  (a sibling benchmark: the same engine, gateway and load)
    ADMIN,
    BENCH,
    MESSAGES,
    cpu_s,
    post_json,
    start_engine,
    start_harnessrl,
    stop,
)

#: py-spy sampling: only the thread holding the GIL (the gateway's Python work, not its waits).
SPY_FLAGS = os.environ.get("SPY_FLAGS", "--gil").split()
SYSTEM, USER = MESSAGES[0]["content"], MESSAGES[1]["content"]
#: (name, path under the rollout's base URL without /v1, body, auth header) per API; ``stream`` is added.
APIS: list[tuple[str, str, dict, str]] = [
    ("chat", "/v1/chat/completions", {"model": "m", "messages": MESSAGES, "max_tokens": 16}, "bearer"),
    ("completions", "/v1/completions", {"model": "m", "prompt": SYSTEM + USER, "max_tokens": 16}, "bearer"),
    ("anthropic", "/v1/messages", {"model": "claude", "system": SYSTEM, "max_tokens": 16,
                                   "messages": [{"role": "user", "content": USER}]}, "x-api-key"),
    ("responses", "/v1/responses", {"model": "m", "instructions": SYSTEM, "input": USER,
                                    "max_output_tokens": 16}, "bearer"),
    ("gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
     {"systemInstruction": {"parts": [{"text": SYSTEM}]}, "contents": [{"role": "user", "parts": [{"text": USER}]}],
      "generationConfig": {"maxOutputTokens": 16}}, "x-goog-api-key"),
]


def request_for(api: tuple[str, str, dict, str], base: str, key: str, stream: bool) -> tuple[str, bytes, dict]:
    name, path, body, auth = api
    url = base.removesuffix("/v1") + path
    body = dict(body)
    if stream and name == "gemini":
        url = url.replace(":generateContent", ":streamGenerateContent") + "?alt=sse"
    elif stream:
        body["stream"] = True
    headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
    headers |= {"Authorization": f"Bearer {key}"} if auth == "bearer" else {auth: key}
    return url, orjson.dumps(body), headers


async def load(requests: list[tuple[str, bytes, dict]], total: int, concurrency: int) -> None:
    counter = iter(range(total))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def worker() -> None:
            for j in counter:  # call j goes to rollout j mod len(requests): no rollout exceeds its call budget
                url, data, headers = requests[j % len(requests)]
                async with http.post(url, data=data, headers=headers) as resp:
                    body = await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"{url}: HTTP {resp.status}: {body[:300]!r}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def summarize(folded: Path, top: int) -> None:
    """The functions with the most samples in py-spy's folded stacks: self, and inclusive (harnessrl's)."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        total += n
        own[_short(frames[-1])] += n
        for f in {_short(f) for f in frames if "harnessrl/" in f}:
            inclusive[f] += n
    if not total:
        print(f"  no samples in {folded}")
        return
    print(f"  {total} samples; self time:")
    for f, n in own.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {f}")
    print("  inclusive, harnessrl's own functions:")
    for f, n in inclusive.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {f}")


def _short(frame: str) -> str:
    """'func (path/to/harnessrl/gateway/call.py:123)' -> 'func (gateway/call.py)', lines folded together."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("harnessrl/", "site-packages/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1500, help="calls per API and mode")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--profile", type=Path, default=None, help="sample the chat loads with py-spy into DIR")
    ap.add_argument("--rate", type=int, default=500, help="py-spy samples per second (--profile)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--apis", default=",".join(a[0] for a in APIS), help="comma-separated subset of the APIs")
    args = ap.parse_args()
    BENCH.mkdir(exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if args.profile and not Path(spy).exists():
        sys.exit("--profile needs py-spy: .venv/bin/pip install py-spy")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.n} calls per row at "
          f"concurrency {args.concurrency}, 16 tokens back")
    engine_proc, engine = start_engine()
    proc, target, _ = start_harnessrl(engine, args.concurrency)
    gateway = target.urls[0][0].split("/r/")[0]
    rows = []
    try:
        for api in [a for a in APIS if a[0] in args.apis.split(",")]:
            for stream in (False, True):
                reqs = []
                for i in range(max(args.concurrency, args.n // 500 + 1)):
                    r = post_json(f"{gateway}/admin/rollouts", {"task_id": f"{api[0]}-{i}", "group_id": "p"}, ADMIN)
                    reqs.append(request_for(api, r["base_url"], r["api_key"], stream))
                asyncio.run(load(reqs, 4 * args.concurrency, args.concurrency))  # warm-up
                profiling = args.profile is not None and api[0] == "chat"
                if profiling:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    out = args.profile / f"chat{'-stream' if stream else ''}.folded"
                    sampler = subprocess.Popen([spy, "record", "--pid", str(target.pid), "--rate", str(args.rate),
                                                "--format", "raw", "--output", str(out), "--nonblocking", *SPY_FLAGS],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1.0)
                c0, t0 = cpu_s(target.pid or 0), time.perf_counter()
                asyncio.run(load(reqs, args.n, args.concurrency))
                cpu_ms = (cpu_s(target.pid or 0) - c0) * 1e3 / args.n
                rows.append((api[0], stream, cpu_ms, args.n / (time.perf_counter() - t0)))
                if profiling:
                    sampler.send_signal(signal.SIGINT)
                    sampler.wait(timeout=30)
    finally:
        stop(proc)
        stop(engine_proc)
    print(f"\n{'api':12s} {'stream':>6s} {'gateway CPU ms/call':>20s} {'calls/s':>9s}")
    for name, stream, cpu_ms, rps in rows:
        print(f"{name:12s} {'yes' if stream else 'no':>6s} {cpu_ms:20.3f} {rps:9.1f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if args.profile:
        for f in sorted(args.profile.glob("*.folded")):
            print(f"\nprofile {f.name}:")
            summarize(f, args.top)


if __name__ == "__main__":
    main()
