"""Helpers for runner tests: harness scripts written on the fly, process liveness checks."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

PY = sys.executable


def script(tmp_path: Path, name: str, code: str) -> list[str]:
    """Write a Python harness script; returns the command that runs it."""
    path = tmp_path / "scripts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return [PY, str(path)]


def pid_dead(pid: int) -> bool:
    """True when the process is gone or a zombie (killed, waiting for its new parent to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_dead(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pid_dead(pid):
            return True
        time.sleep(0.02)
    return pid_dead(pid)


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``, seen from outside any sandbox."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and not pid_dead(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, timeout_s: float = 5.0) -> bool:
    """True once no live process's command line holds ``marker`` (e.g. the test's own tmp path)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not processes_with(marker):
            return True
        time.sleep(0.02)
    return not processes_with(marker)


def wait_file(path: Path, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


async def await_file(path: Path, timeout_s: float = 10.0) -> str:
    """Like ``wait_file`` without blocking the event loop the runner needs."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never appeared")
