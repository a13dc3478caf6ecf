"""Fault suite fixtures: real processes (fake engines, gateways) on loopback, and a small file system.

Every fault is a real one: a SIGKILLed process, a full tmpfs, a stopped PostgreSQL server. Fakes are only
the engine (a deterministic HTTP server) and, where a cluster cannot run here, the Kubernetes API.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `fakes` importable
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/faults -> `faultkit` importable

from faultkit import EngineProc, GatewayProc, free_port, start_gateway_proc  # noqa: E402


@pytest.fixture
def engine_procs() -> Iterator:
    started: list[EngineProc] = []

    def make(*args: str, port: int | None = None) -> EngineProc:
        e = EngineProc(port or free_port(), list(args)).start()
        started.append(e)
        return e

    yield make
    for e in started:
        e.kill()


@pytest.fixture
def gateway_procs(tmp_path: Path) -> Iterator:
    started: list[GatewayProc] = []

    def make(db_url: str, engines: list[str], config: dict | None = None, port: int | None = None) -> GatewayProc:
        gw = start_gateway_proc(tmp_path, db_url, engines, config, port, tag=str(len(started)))
        started.append(gw)
        return gw

    yield make
    for g in started:
        g.stop()


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for this test (needs root or CAP_SYS_ADMIN; skipped with the reason else)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 4 MiB tmpfs for the disk-full fault (needs root/CAP_SYS_ADMIN): "
                    f"{r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


