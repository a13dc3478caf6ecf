"""The bubblewrap sandbox's cost per attempt: start-to-exit time and a 1 MiB HTTP round trip through the
gateway relay, sandboxed vs not, in the same run.

    .venv/bin/python benchmarks/sandbox_overhead.py [--attempts 20]

Each attempt is a real LocalRunner attempt of a Python harness that fetches 1 MiB from a loopback HTTP
server standing in for the gateway (directly when unsandboxed; through the relay when sandboxed).
Attempts alternate between the two modes and the medians are reported, because the CPU may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from harnessrl.runners import RunnerConfig, make_attempt_spec
from harnessrl.runners.local import LocalRunner

BODY = b"x" * (1 << 20)
HARNESS = """
import os, time, urllib.request
t = time.perf_counter()
data = urllib.request.urlopen(os.environ["OPENAI_BASE_URL"] + "/blob", timeout=30).read()
assert len(data) == 1 << 20
print(f"{(time.perf_counter() - t) * 1000:.2f}")
"""


class Blob(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=20)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Blob)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gateway = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "harness.py"
        script.write_text(HARNESS)
        runners = {mode: LocalRunner(RunnerConfig(command=[sys.executable, str(script)], sandbox=mode),
                                     Path(tmp) / mode) for mode in ("none", "bubblewrap")}
        total: dict[str, list[float]] = {m: [] for m in runners}
        fetch: dict[str, list[float]] = {m: [] for m in runners}
        for i in range(args.attempts):
            for mode, runner in runners.items():
                config = runner.config
                spec = make_attempt_spec(config, rollout_id=f"{mode}-{i}", task_id="t", task_input={},
                                         gateway_url=gateway, api_key="k")
                t0 = time.perf_counter()
                result = asyncio.run(runner.run(spec))
                total[mode].append((time.perf_counter() - t0) * 1000)
                assert result.exit_code == 0, result.stderr
                fetch[mode].append(float(result.stdout.split()[-1]))
                asyncio.run(runner.release(result))
    server.shutdown()
    for mode in runners:
        print(f"{mode:>10}: attempt {statistics.median(total[mode]):7.1f} ms, "
              f"1 MiB fetch {statistics.median(fetch[mode]):6.2f} ms (median of {args.attempts})")
    print(f"sandbox/none: attempt x{statistics.median(total['bubblewrap']) / statistics.median(total['none']):.2f}, "
          f"fetch x{statistics.median(fetch['bubblewrap']) / statistics.median(fetch['none']):.2f}")


if __name__ == "__main__":
    main()
