"""Streaming time to first byte: through the gateway vs the engine's own, for every API and render mode.

One invocation, one machine: fake engines that sample a token every ``--token-ms`` (tests/fakes/
fake_engine.py, vLLM dialect: one for engine render mode, one whose token ids spell words in the 'tiny'
tokenizer for gateway render mode), the gateway in its own process (durable SQLite recording), and this
client (raw aiohttp, sequential requests). For each case it measures, per request, the time to the first response byte and
to the first text token, and the whole answer's time; it prints medians, the gateway's added time and
whether it meets the target (first byte through the gateway <= the engine's own + 5 ms).

Baselines: the engine's own chat stream for chat, Anthropic Messages and Responses in engine render mode,
its /completions stream for completions, and its /completions stream of token ids (what the gateway sends
it) for gateway render mode. "First text" is the first chunk with sampled text (for an engine's own
/completions: with a sampled token).

    .venv/bin/python benchmarks/streaming_ttfb.py [--n 40] [--token-ms 20] [--tokens 48]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "bench-admin-token"
TARGET_MS = 5.0
TEXT = "the quick brown fox jumps over the lazy dog and runs back home again before the night falls "

ENGINE = """
import sys, uvicorn
sys.path.insert(0, {tests!r})
from fakes.fake_engine import FakeEngine
from harnessrl.gateway.render.factory import load_tokenizer

ids = load_tokenizer("tiny").encode({text!r}, add_special_tokens=False)[:{tokens}]

class Words(FakeEngine):
    def generate(self, prompt, body, index):
        return list(ids), "stop", None

e = Words() if {words} else FakeEngine(completion_len={tokens} - 1)
e.token_delay_s = {delay}
uvicorn.run(e, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""

GATEWAY = """
import time
from harnessrl.gateway import GatewayConfig, serve_in_thread
from harnessrl.gateway.render import RenderConfig
from harnessrl.store import open_store

cfg = GatewayConfig(port={port}, admin_token={admin!r}, render_mode={mode!r},
                    render=RenderConfig(tokenizer="tiny"))
server = serve_in_thread(open_store({db!r}), [{engine!r}], cfg)
while True:
    time.sleep(3600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:2]} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def post_json(url: str, obj: object, token: str) -> dict:
    import urllib.request

    req = urllib.request.Request(url, data=orjson.dumps(obj), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return orjson.loads(r.read())


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _has_text(line: bytes) -> bool:
    """Whether an SSE data line carries sampled text (not just a role, a start event or usage)."""
    if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
        return False
    d = orjson.loads(line[6:])
    if "choices" in d:  # an engine's own /completions answer: its first sampled token counts
        ch = (d["choices"] or [{}])[0]
        return bool(ch.get("text") or (ch.get("delta") or {}).get("content") or ch.get("token_ids"))
    if d.get("type") == "content_block_delta":
        return bool(d["delta"].get("text"))
    return d.get("type") == "response.output_text.delta" and bool(d.get("delta"))


async def one(http: aiohttp.ClientSession, url: str, headers: dict, body: dict) -> tuple[float, float, float]:
    """(first byte, first text, whole answer) in seconds."""
    t0 = time.perf_counter()
    first_byte = first_text = None
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        async for line in resp.content:
            now = time.perf_counter()
            if first_byte is None:
                first_byte = now - t0
            if first_text is None and _has_text(line.rstrip(b"\n")):
                first_text = now - t0
    total = time.perf_counter() - t0
    return first_byte or total, first_text or total, total


async def measure(url: str, headers: dict, body: dict, n: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as http:
        for _ in range(3):  # warm up connections and caches
            await one(http, url, headers, body)
        runs = [await one(http, url, headers, body) for _ in range(n)]
    return {k: statistics.median(r[i] for r in runs) * 1e3 for i, k in enumerate(("byte", "text", "total"))}


CHAT = {"model": "m", "stream": True, "max_tokens": 256, "messages": [{"role": "user", "content": "Say hello"}]}
CASES = {  # name: (gateway path, body, baseline: 'chat' or 'completions')
    "chat": ("/chat/completions", CHAT, "chat"),
    "completions": ("/completions", {"model": "m", "stream": True, "max_tokens": 256, "prompt": "Say hello"},
                    "completions"),
    "anthropic": ("/messages", {"model": "claude", "stream": True, "max_tokens": 256,
                                "messages": [{"role": "user", "content": "Say hello"}]}, "chat"),
    "responses": ("/responses", {"model": "m", "stream": True, "max_output_tokens": 256, "input": "Say hello"},
                  "chat"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="requests per case (medians reported)")
    ap.add_argument("--token-ms", type=float, default=20.0, help="the engine's time per sampled token")
    ap.add_argument("--tokens", type=int, default=48, help="tokens per answer")
    args = ap.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    engines: dict[str, tuple[subprocess.Popen, str]] = {}
    rows: list[tuple[str, str, dict, dict]] = []
    try:
        for mode, words in (("engine", False), ("gateway", True)):
            port = free_port()
            proc = subprocess.Popen([sys.executable, "-c", ENGINE.format(
                tests=str(ROOT / "tests"), text=TEXT * 4, tokens=args.tokens, delay=args.token_ms / 1e3,
                port=port, words=words)], cwd=ROOT, env=env)
            engines[mode] = (proc, f"http://127.0.0.1:{port}/v1")
            wait_http(f"http://127.0.0.1:{port}/health", proc)
        plain, words_url = engines["engine"][1], engines["gateway"][1]
        base = {"chat": asyncio.run(measure(f"{plain}/chat/completions", {}, CHAT, args.n)),
                "completions": asyncio.run(measure(f"{plain}/completions", {}, CASES["completions"][1], args.n)),
                "tokens": asyncio.run(measure(f"{words_url}/completions", {}, {
                    "model": "m", "stream": True, "max_tokens": 256, "prompt": list(range(1, 40))}, args.n))}
        for mode in ("engine", "gateway"):
            with tempfile.TemporaryDirectory() as tmp:
                gport = free_port()
                gw = subprocess.Popen([sys.executable, "-c", GATEWAY.format(
                    port=gport, admin=ADMIN, mode=mode, db=f"sqlite:///{tmp}/ttfb.db", engine=engines[mode][1])],
                    cwd=ROOT, env=env)
                try:
                    wait_http(f"http://127.0.0.1:{gport}/healthz", gw)
                    for name, (path, body, baseline) in CASES.items():
                        if mode == "gateway" and name == "completions":
                            continue  # completions are token-level already: the same in both modes
                        r = post_json(f"http://127.0.0.1:{gport}/admin/rollouts",
                                      {"task_id": f"ttfb-{mode}-{name}", "group_id": "ttfb"}, ADMIN)
                        got = asyncio.run(measure(r["base_url"] + path, {"Authorization": f"Bearer {r['api_key']}"},
                                                  body, args.n))
                        ref = base["tokens"] if mode == "gateway" else base[baseline]
                        rows.append((mode, name, got, ref))
                finally:
                    stop(gw)
    finally:
        for proc, _ in engines.values():
            stop(proc)

    print(f"\nstreaming TTFB, medians of {args.n} sequential requests; engine samples a token every "
          f"{args.token_ms:g} ms, {args.tokens} tokens an answer")
    print(f"{'render mode':<12}{'API':<13}{'first byte (ms)':>26}{'first text (ms)':>26}{'whole answer (ms)':>22}"
          "  target")
    print(f"{'':<25}{'gateway / engine (added)':>26}{'gateway / engine (added)':>26}{'gateway / engine':>22}")
    ok = True
    for mode, name, got, ref in rows:
        added = got["byte"] - ref["byte"]
        meets = added <= TARGET_MS
        ok &= meets
        cells = [f"{got[k]:7.1f} / {ref[k]:6.1f} ({got[k] - ref[k]:+5.1f})" for k in ("byte", "text")]
        total = f"{got['total']:7.1f} / {ref['total']:6.1f}"
        print(f"{mode:<12}{name:<13}{cells[0]:>26}{cells[1]:>26}{total:>22}"
              f"  {'ok' if meets else 'MISSED'} (<= +{TARGET_MS:g})")
    print("all cases within the target" if ok else "some cases missed the target")


if __name__ == "__main__":
    main()
