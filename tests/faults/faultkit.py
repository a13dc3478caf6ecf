"""Fault suite helpers: fake engines and gateways as real processes, a disk filled to the last byte."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

TESTS = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # tests/ -> `fakes` importable

from run_config import write_run_config  # noqa: E402

ADMIN = "faults-admin-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code < 500:
                return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not answer {url} within {timeout_s}s")


@dataclass
class EngineProc:
    """The fake engine in its own process (``engine_proc.py``)."""

    port: int
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> EngineProc:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("engine_proc.py")),
                                      "--port", str(self.port), *self.args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"http://127.0.0.1:{self.port}/health", self.proc, "fake engine")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@dataclass
class GatewayProc:
    """``harnessrl gateway`` as a real process."""

    proc: subprocess.Popen
    url: str
    log: Path

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN}"}

    def rollout(self, task_id: str = "t", group_id: str = "g") -> dict:
        r = httpx.post(f"{self.url}/admin/rollouts", headers=self.admin, timeout=30,
                       json={"task_id": task_id, "group_id": group_id})
        assert r.status_code == 201, r.text
        return r.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_gateway_proc(workdir: Path, db_url: str, engines: list[str], config: Mapping[str, Any] | None = None,
                       port: int | None = None, tag: str = "") -> GatewayProc:
    """``harnessrl gateway`` as its own process (stderr in ``workdir``), once it answers."""
    port = port or free_port()
    log = workdir / f"gateway-{port}{tag}.log"
    cmd = [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway", "--db", db_url,
           "--port", str(port)]
    for e in engines:
        cmd += ["--engine", e]
    if config:
        cmd += ["--config", str(write_run_config(workdir / f"gateway-{port}.toml", config))]
    env = {**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    gw = GatewayProc(proc, f"http://127.0.0.1:{port}", log)
    try:
        wait_http(f"{gw.url}/v1/models", proc, "gateway", timeout_s=120)  # a loaded machine imports slowly
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}; its log: {log.read_text()[-2000:]}") from None
    return gw


def fill(directory: Path, name: str = "filler") -> Path:
    """Fill the file system of ``directory`` to the last byte; returns the filler file."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return path


def _imports():  # the run's modules are heavy: imported by the tests that use them
    from harnessrl.config import load_config
    from harnessrl.controller import Controller
    from harnessrl.stack import Stack
    from harnessrl.store import open_store
    from harnessrl.tasks import load_tasks

    return load_config, Controller, Stack, open_store, load_tasks


def write_fault_config(tmp_path: Path, engines: list[str], *layers: Mapping[str, Any], timeout_s: float = 60,
                       tasks: list[dict] | None = None, max_retries: int = 3, gateway_port: int | None = None) -> Path:
    """``tmp_path / "run.toml"``: a run over fake engines at ``engines`` whose harness is ``stream_harness.py``,
    with ``layers`` merged on top (``run_config.merged``); its tasks are written to ``tmp_path / "tasks.jsonl"``."""
    gateway_port = gateway_port or free_port()
    tasks = tasks or [{"id": "story", "input": {"question": "tell me a long story"}}]
    (tmp_path / "tasks.jsonl").write_text("".join(orjson.dumps(t).decode() + "\n" for t in tasks))
    return write_run_config(tmp_path / "run.toml", {
        "run": {"name": "faults", "dir": str(tmp_path / "run"), "steps": 1, "tasks_per_step": len(tasks),
                "attempts_per_task": 1, "eval_at_start": False, "max_retries": max_retries},
        "tasks": {"train": str(tmp_path / "tasks.jsonl")},
        "engine": {"kind": "openai", "urls": engines},
        "runner": {"command": [sys.executable, str(HERE / "stream_harness.py")], "timeout_s": timeout_s,
                   "sandbox": "none"},
        "rewards": {"exit_code_map": {0: 1.0}},
        "gateway": {"port": gateway_port, "health_interval_s": 0.2},
    }, *layers)


async def collect_one_step(cfg_path: Path, during: Callable[[str], None] | None = None,
                           stats: dict | None = None) -> tuple[list, list]:
    """Run step 1's attempts through the real controller (no trainer); returns (trained-on, all rollouts).
    ``stats`` receives the step's counts (``count/...`` metrics without the prefix)."""
    load_config, Controller, Stack, open_store, load_tasks = _imports()
    config = load_config(cfg_path)
    store = open_store(config.store_url)
    try:
        run_id = "faults-run"
        if run_id not in {r.id for r in store.list_runs()}:  # a restarted controller continues the run
            store.create_run("faults", config.model_dump(mode="json"), run_id=run_id)
        tasks = load_tasks(config, run_id)
        store.upsert_tasks(run_id, [lt.task for s in tasks.values() for lt in s])
        stack = Stack.start(config, store, run_id=run_id, train=False, checkpoint=None)
        try:
            watcher = threading.Thread(target=during, args=(stack.gateway_url,), daemon=True) if during else None
            if watcher is not None:
                watcher.start()
            async with Controller(config, stack, run_id, tasks) as ctl:
                good = await ctl.collect_step(1)
                if stats is not None:
                    stats.update(ctl.step_stats.get(1, {}))
            return good, store.list_rollouts(run_id=run_id)
        finally:
            stack.close()
    finally:
        store.close()
