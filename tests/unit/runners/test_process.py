"""A command's processes end with it: the ones in its group, and a daemon that left the group (setsid) but
still carries the command's tag in its environment. Nothing else is touched."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harnessrl.runners.process import TAG_ENV, run_process

DAEMON = """
import subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(p.pid))
"""


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Ended (a zombie waiting for its reaper counts: it runs nothing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="the tag is read from Linux's /proc")
def test_a_daemon_that_left_the_group_dies_with_the_command(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        outcome = asyncio.run(run_process(
            [sys.executable, "-c", DAEMON, str(tmp_path / "pid")], cwd=tmp_path, env=dict(os.environ),
            timeout_s=30, kill_grace_s=1, max_output_bytes=4096))
        assert outcome.exit_code == 0, outcome.stderr
        daemon = int((tmp_path / "pid").read_text())
        assert _gone(daemon), "the daemon outlived the command"
        assert bystander.poll() is None, "a process the command did not start was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_the_command_sees_its_own_tag(tmp_path: Path) -> None:
    printed = [asyncio.run(run_process(
        [sys.executable, "-c", f"import os; print(os.environ[{TAG_ENV!r}])"], cwd=tmp_path, env={"PATH": "/usr/bin"},
        timeout_s=30, kill_grace_s=1, max_output_bytes=4096)).stdout.strip() for _ in range(2)]
    assert all(len(tag) == 32 for tag in printed) and printed[0] != printed[1]  # one per command


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="the tag is read from Linux's /proc")
def test_a_pid_reused_between_the_scan_and_the_kill_is_spared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan found a tagged process that then exited, and its PID went to another: the kill goes through a
    pidfd opened before the tag is checked again, so the newcomer (no tag) lives."""
    from harnessrl.runners import process

    tagged = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, TAG_ENV: "the-tag"}, start_new_session=True)
    newcomer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        monkeypatch.setattr(process, "_tagged", lambda tag: [newcomer.pid])  # what a reused PID looks like
        process._kill_escaped("the-tag", pgid=0)
        time.sleep(0.2)
        assert newcomer.poll() is None, "a process without the tag was killed"
        monkeypatch.setattr(process, "_tagged", lambda tag: [tagged.pid])
        process._kill_escaped("the-tag", pgid=0)
        assert _gone(tagged.pid), "the tagged process outlived the kill"
    finally:
        for p in (tagged, newcomer):
            p.kill()
            p.wait()
