"""Fixtures: a PostgreSQL store in its own schema, a fake engine, and gateway *processes* sharing it.

Skipped unless ``HARNESSRL_TEST_POSTGRES_URL`` names a server (``eval "$(bash scripts/postgres.sh)"``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

ADMIN = "pg-admin-token"



@pytest.fixture
def engine_server() -> Iterator[EngineServer]:
    srv = EngineServer(FakeEngine(completion_len=12)).start()
    yield srv
    srv.stop()


@dataclass
class GatewayProcess:
    proc: subprocess.Popen
    url: str
    log: Path

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _harnessrl() -> list[str]:
    script = Path(sys.executable).parent / "harnessrl"  # the console script of this environment
    return [str(script)] if script.exists() else [sys.executable, "-m", "harnessrl.cli"]


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[[str, str], GatewayProcess]]:
    """``start_gateway(db_url, engine_url)``: a ``harnessrl gateway`` process, healthy on return."""
    started: list[GatewayProcess] = []

    def start(db: str, engine_url: str) -> GatewayProcess:
        port = _free_port()
        log = tmp_path / f"gateway-{port}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [*_harnessrl(), "--log-level", "WARNING", "gateway", "--engine", engine_url, "--db", db,
                 "--port", str(port)],
                env={**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN}, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        gw = GatewayProcess(proc, f"http://127.0.0.1:{port}", log)
        started.append(gw)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{gw.url}/healthz", timeout=1).status_code == 200:
                    return gw
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gateway did not become healthy:\n{log.read_text()[-3000:]}")

    yield start
    for gw in started:
        gw.proc.terminate()
    for gw in started:
        try:
            gw.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            gw.proc.kill()
            gw.proc.wait()
