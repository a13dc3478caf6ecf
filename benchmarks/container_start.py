"""Attempt start latency: from "the attempt starts" to "the harness's first model call reaches the gateway",
on the host, in a container made per attempt (cold), and in a container started ahead of time (warm pool).

    .venv/bin/python benchmarks/container_start.py [--rounds 5] [--concurrency 8]
    /tmp/libs-venv/bin/python benchmarks/container_start.py --libraries [--rounds 7] \
        [--compose /tmp/harbor-venv/bin/podman-compose]

Why: a pool of pre-started containers (issue 51) is only worth its code if it saves a real part of an
attempt. The gateway is a real HTTP server on loopback that records when each rollout's first request
arrives; the harness is one urllib POST to $OPENAI_BASE_URL/chat/completions. Host attempts are
``LocalRunner``'s (bubblewrap too where ``bwrap`` is installed), cold ones ``ContainerRunner``'s (image
built beforehand, not counted). Warm ones are ``ContainerRunner``'s with ``[runner.container] pool_size =
--concurrency`` (environments/pool.py), the pool full when a round starts; the refills its takes start run
beside the round's attempts, as they would in a run. "warm, no refill" holds the refill until the round is
over: the upper bound, what a pool saves where its refill finds idle CPUs and no queue. Modes are
interleaved per round and medians printed, because the CPU is shared. ``--concurrency`` starts that many
attempts at once per mode: Podman's create/start serialize on its lock.

``--libraries`` compares the container layer's candidates on one container's create+start+exec of
``true`` (+ removal, not counted): the engine CLI, docker-py and podman-py over Podman's API socket (a
``podman system service`` this script starts and stops), and Harbor's own path (compose) with ``--compose``. It needs only the standard library and whichever
of ``docker``/``podman`` is importable (install them in a throwaway venv, never the project's).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HARNESS = ("import os, urllib.request\n"
           "req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=b'{}',"
           " headers={'Content-Type': 'application/json'})\n"
           "urllib.request.urlopen(req, timeout=60).read()\n")
DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\nCOPY task.txt /app/\n"  # COPY: buildah makes /app
IMAGE = "python:3.11-slim"
REPLY = (b'{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":'
         b'{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}')


class Gateway(http.server.BaseHTTPRequestHandler):
    """Records the arrival (perf_counter) of each rollout's first request: the path is /r/<id>/v1/..."""

    arrivals: dict[str, float] = {}

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        now = time.perf_counter()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = self.path.split("/")
        if len(parts) > 2 and parts[1] == "r":
            self.arrivals.setdefault(parts[2], now)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, *args: object) -> None:
        pass


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- attempts (host, cold, warm) ----------
class Bench:
    """The runners of every mode, sharing one gateway and one task; times in milliseconds."""

    def __init__(self, tmp: Path, gateway: str, pool_size: int) -> None:
        from harnessrl.harbor.load import load_harbor_tasks
        from harnessrl.runners import RunnerConfig, make_runner
        from harnessrl.runners.local import LocalRunner

        self.tmp, self.gateway = tmp, gateway
        command = [sys.executable, "-c", HARNESS]
        task = tmp / "task"
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
        (task / "environment" / "task.txt").write_text("say ok\n")
        (task / "instruction.md").write_text("Say ok.\n")
        (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
        (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
        (self.task,) = load_harbor_tasks(task, tmp / "cache", runner_timeout_s=60, verifier_timeout_s=60,
                                         container=True)
        self.runners: dict[str, Any] = {}
        modes = ["none"] + (["bubblewrap"] if shutil.which("bwrap") else [])
        for mode in modes:
            cfg = RunnerConfig(command=command, sandbox=mode, concurrency=64, timeout_s=120)
            self.runners[f"host ({mode})"] = LocalRunner(cfg, tmp / f"host-{mode}")
        cfg = RunnerConfig.model_validate({"environment": "container", "command": command, "timeout_s": 120,
                                           "concurrency": 64})
        self.runners["container cold"] = make_runner(cfg, tmp / "cold", run_id="bench-start")
        warm = cfg.model_copy(update={"container": cfg.container.model_copy(update={"pool_size": pool_size})})
        self.runners["container warm"] = make_runner(warm, tmp / "warm", run_id="bench-start")
        self.runners["warm, no refill"] = make_runner(warm, tmp / "warm2", run_id="bench-start")
        self.refill_ms: list[float] = []

    def spec(self, runner: Any, rid: str) -> Any:
        from harnessrl.runners import make_attempt_spec

        return make_attempt_spec(runner.config, rollout_id=rid, task_id=self.task.id, task_input={"q": 1},
                                 gateway_url=self.gateway, api_key="k", assets=self.task.assets)

    async def attempt(self, mode: str, rid: str) -> float:
        """One attempt; its start-to-first-call latency in ms (the attempt is released afterwards)."""
        runner = self.runners[mode]
        spec = self.spec(runner, rid)
        t0 = time.perf_counter()
        result = await runner.run(spec)
        assert result.exit_code == 0, (mode, result.reason, result.stderr[-2000:])
        await runner.release(result)
        return (Gateway.arrivals[rid] - t0) * 1000

    async def refilled(self, mode: str) -> float:
        """Wait until a warm runner's pool is full again; the wait in ms (the refill's lag after a round)."""
        pool = self.runners[mode].pool
        t = time.perf_counter()
        while sum(len(v) for v in pool._ready.values()) < pool.size:
            await asyncio.sleep(0.05)
        return (time.perf_counter() - t) * 1000


def _record(into: list[tuple[Any, Any]]) -> Callable[[Any, Any], None]:
    return lambda key, spec: into.append((key, spec))


async def attempts(bench: Bench, rounds: int, concurrency: int) -> dict[tuple[str, int], list[float]]:
    got: dict[tuple[str, int], list[float]] = {}
    for i in range(rounds):
        for mode in bench.runners:
            for n in sorted({1, concurrency}):
                tag = "".join(c for c in mode if c.isalnum())[:12]
                rids = [f"{tag}-{i}-{n}-{j}" for j in range(n)]
                if mode.startswith("warm") or mode == "container warm":
                    bench.refill_ms.append(await bench.refilled(mode))
                pool = bench.runners[mode].pool if mode == "warm, no refill" else None
                later: list[tuple[Any, Any]] = []
                if pool is not None:  # the upper bound: the refill waits until the round is over
                    pool._refill = _record(later)
                got.setdefault((mode, n), []).extend(await asyncio.gather(*(bench.attempt(mode, r) for r in rids)))
                if pool is not None:
                    del pool._refill
                    pool._refill(*later[-1])
    return got


def report_attempts(got: dict[tuple[str, int], list[float]], refill_ms: list[float], rounds: int,
                    concurrency: int) -> None:
    print(f"start to first model call, ms (median over {rounds} rounds; at {concurrency}: every attempt's)")
    for (mode, n), xs in sorted(got.items(), key=lambda kv: (kv[0][1], list(dict(got).keys()).index(kv[0]))):
        print(f"  {mode:>18} x{n:<2}: {med(xs):8.0f}   (min {min(xs):6.0f}, max {max(xs):6.0f})")
    if not any(m.startswith("host (bubblewrap)") for m, _ in got):
        print("  host (bubblewrap): skipped, bwrap is not installed here")
    for n in sorted({n for _, n in got}):
        host, cold = med(got[("host (none)", n)]), med(got[("container cold", n)])
        print(f"  at {n}: cold/host x{cold / host:.1f}")
        for mode in ("container warm", "warm, no refill"):
            warm = med(got[(mode, n)])
            print(f"    {mode}: warm/cold x{warm / cold:.2f}, a pool saves {cold - warm:.0f} ms per attempt = "
                  f"{(cold - warm) / 20000:.1%} of a 20 s attempt, {(cold - warm) / 60000:.1%} of a 60 s one")
    print(f"  pool refill: waited {med(refill_ms):.0f} ms (median) before a warm round for the pool to be full again "
          "(its work is moved off the attempt's path, not removed: the same CPUs and engine lock pay it)")


# ---------------------------------------------------------------- libraries -----------------------------
def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout


def libraries(rounds: int, compose: str | None) -> None:
    """create+start+exec ``true`` per candidate, interleaved, medians in ms; removal after the clock."""
    sock = Path(tempfile.mkdtemp(prefix="hrl-api-")) / "podman.sock"
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.1)
        cases: dict[str, Callable[[str], Callable[[], None]]] = {"podman CLI": cli_case("podman")}
        if shutil.which("docker"):
            os.environ["DOCKER_HOST"] = f"unix://{sock}"
            cases["docker CLI -> podman API"] = cli_case("docker")
        try:
            import docker
            client = docker.DockerClient(base_url=f"unix://{sock}", timeout=120)
            cases[f"docker-py {docker.__version__} -> podman API"] = docker_case(client)
        except ImportError:
            print("docker-py: not importable, skipped")
        try:
            import podman
            pclient = podman.PodmanClient(base_url=f"unix://{sock}", timeout=120)
            cases[f"podman-py {podman.__version__} -> podman API"] = docker_case(pclient)
        except ImportError:
            print("podman-py: not importable, skipped")
        if compose:
            cases["Harbor's path: podman-compose"] = compose_case(compose)
        times: dict[str, list[float]] = {k: [] for k in cases}
        for i in range(rounds + 1):  # round 0 warms each path up and is not counted
            for label, case in cases.items():
                t = time.perf_counter()
                cleanup = case(f"hrl-lib-{i}-{len(times[label])}-{os.getpid()}-{abs(hash(label)) % 1000}")
                if i:
                    times[label].append((time.perf_counter() - t) * 1000)
                cleanup()
        print(f"create+start+exec `true` of {IMAGE}, ms (median of {rounds}, interleaved)")
        base = med(times["podman CLI"])
        for label, xs in times.items():
            print(f"  {label:>36}: {med(xs):7.0f}  (x{med(xs) / base:.2f} of the CLI)")
    finally:
        service.terminate()
        service.wait(timeout=30)


def cli_case(binary: str) -> Callable[[str], Callable[[], None]]:
    def case(name: str) -> Callable[[], None]:
        run(binary, "create", "--name", name, "--network", "none", IMAGE, "sleep", "infinity")
        run(binary, "start", name)
        run(binary, "exec", name, "true")
        return lambda: (run(binary, "rm", "-f", "-t", "0", name), None)[1] if binary == "podman" \
            else (run(binary, "rm", "-f", name), None)[1]
    return case


def compose_case(binary: str) -> Callable[[str], Callable[[], None]]:
    """What Harbor's docker/podman environment runs per trial (its prebuilt + no-network compose files):
    ``down --remove-orphans``, ``up -d``, then ``exec main``; podman-compose 1.x with ``--in-pod=false``."""
    folder = Path(tempfile.mkdtemp(prefix="hrl-compose-"))
    (folder / "compose.yaml").write_text(f'services:\n  main:\n    image: {IMAGE}\n    network_mode: none\n'
                                         '    command: [ "sh", "-c", "sleep infinity" ]\n')

    def case(name: str) -> Callable[[], None]:
        base = [binary, "--in-pod=false", "--project-name", name.replace("-", ""), "-f", str(folder / "compose.yaml")]
        run(*base, "down", "--remove-orphans")
        run(*base, "up", "-d")
        run(*base, "exec", "-T", "main", "true")
        return lambda: (run(*base, "down", "-t", "0"), None)[1]
    return case


def docker_case(client: Any) -> Callable[[str], Callable[[], None]]:
    """docker-py and podman-py share the shape: containers.create/start, exec_run, remove(force)."""
    def case(name: str) -> Callable[[], None]:
        box = client.containers.create(IMAGE, ["sleep", "infinity"], name=name, network_mode="none")
        box.start()
        got = box.exec_run(["true"])
        code = got[0] if isinstance(got, tuple) else got.exit_code
        assert code == 0, got
        return lambda: box.remove(force=True)
    return case


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--libraries", action="store_true", help="compare the container layer's candidates")
    parser.add_argument("--compose", help="with --libraries: a podman-compose binary, to time Harbor's path too")
    args = parser.parse_args()
    if args.libraries:
        libraries(args.rounds, args.compose)
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), f"http://127.0.0.1:{server.server_address[1]}", args.concurrency)

        async def go() -> None:
            for k, mode in enumerate(bench.runners):  # warm-up: builds the image, sweeps; not counted
                await bench.attempt(mode, f"warmup-{k}")
            got = await attempts(bench, args.rounds, args.concurrency)
            for mode in ("container warm", "warm, no refill"):
                await bench.runners[mode].aclose()
            report_attempts(got, bench.refill_ms, args.rounds, args.concurrency)
        asyncio.run(go())
    server.shutdown()


if __name__ == "__main__":
    main()
