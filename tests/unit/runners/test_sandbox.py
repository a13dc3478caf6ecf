"""The bubblewrap sandbox of local attempts: what an attempt sees, and how the runner chooses it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from harnessrl.runners import RunnerConfig, make_attempt_spec
from harnessrl.runners import sandbox as sandbox_mod
from harnessrl.runners.local import LocalRunner
from harnessrl.runners.sandbox import SandboxUnavailable, python_paths, resolve_bwrap
from harnessrl.types import RolloutStatus

from ._helpers import script, wait_dead, wait_gone

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/bubblewrap.sh)")

LOOK = """
import json, os, socket, sys
here = os.path.dirname(os.path.abspath(__file__))
seen = {"cwd": os.getcwd(), "tmp": os.listdir("/tmp"), "home": os.listdir(os.environ["HOME"]),
        "tmpdir": os.environ["TMPDIR"]}
try:
    seen["hidden"] = open(os.path.join(here, "secret.txt")).read()
except OSError as exc:
    seen["hidden"] = type(exc).__name__
try:
    open(os.path.join(here, "written.txt"), "w").write("x"); seen["write_beside"] = "ok"
except OSError as exc:
    seen["write_beside"] = type(exc).__name__
for name, port in (("gateway", int(sys.argv[1])), ("other", int(sys.argv[2]))):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=2); seen[name] = "connected"
        try:  # until the far end closes: the relay has then reached it (the attempt's end closes the relay)
            c.settimeout(10); c.recv(1)
        except OSError:
            pass
        c.close()
    except OSError as exc:
        seen[name] = type(exc).__name__
open("seen.json", "w").write(json.dumps(seen))
"""


def _listener() -> tuple[socket.socket, list[int]]:
    sock = socket.create_server(("127.0.0.1", 0))
    hits: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            hits.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock, hits


@needs_bwrap
def test_an_attempt_sees_its_workspace_and_reaches_only_the_gateway(tmp_path: Path) -> None:
    gateway, gateway_hits = _listener()
    other, other_hits = _listener()
    cmd = script(tmp_path, "look.py", LOOK)
    (tmp_path / "scripts" / "secret.txt").write_text("answers")
    config = RunnerConfig(command=[*cmd, str(gateway.getsockname()[1]), str(other.getsockname()[1])],
                          sandbox="bubblewrap")
    runner = LocalRunner(config, tmp_path / "attempts", hide=[tmp_path / "scripts" / "secret.txt"])
    spec = make_attempt_spec(config, rollout_id="s1", task_id="t", task_input={},
                             gateway_url=f"http://127.0.0.1:{gateway.getsockname()[1]}", api_key="k")
    marker = Path("/tmp") / f"outside-{os.getpid()}-{time.time_ns()}"  # the real /tmp is not the attempt's
    marker.write_text("x")
    try:
        result = asyncio.run(runner.run(spec))
    finally:
        gateway.close()
        other.close()
        marker.unlink(missing_ok=True)
    assert result.status is RolloutStatus.SUCCEEDED, result.stderr
    seen = json.loads((result.workdir / "seen.json").read_text())
    home = Path(os.environ["HOME"]).resolve()
    python_in_home = {p.relative_to(home).parts[0] for p in python_paths() if home in p.parents}
    assert seen["cwd"] == str(result.workdir) and marker.name not in seen["tmp"]
    assert set(seen["home"]) <= python_in_home  # an empty $HOME, but for a Python installed under it
    assert seen["tmpdir"] == "/tmp" and seen["hidden"] in ("PermissionError", "")  # masked
    assert seen["write_beside"] == "OSError" and not (tmp_path / "scripts" / "written.txt").exists()
    assert seen["gateway"] == "connected" and gateway_hits == [1]  # through the relay
    assert seen["other"] == "ConnectionRefusedError" and other_hits == []


def test_bubblewrap_required_but_missing_is_refused_and_auto_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        resolve_bwrap("bubblewrap")
    with caplog.at_level(logging.WARNING):
        assert resolve_bwrap("auto") is None
    assert "WITHOUT a sandbox" in caplog.text
    assert resolve_bwrap("none") is None
    assert LocalRunner(RunnerConfig(), Path("unused")).sandbox is None


@needs_bwrap
def test_auto_picks_bubblewrap_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        runner = LocalRunner(RunnerConfig(), Path("unused"))
    assert runner.sandbox is not None and "bubblewrap sandbox" in caplog.text


HANG = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open("pids", "w").write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def test_unsandboxed_attempts_keep_the_process_group_guarantees(tmp_path: Path) -> None:
    config = RunnerConfig(command=script(tmp_path, "hang.py", HANG), sandbox="none", timeout_s=1.0,
                          kill_grace_s=0.2)
    spec = make_attempt_spec(config, rollout_id="n1", task_id="t", task_input={},
                             gateway_url="http://127.0.0.1:9", api_key="k")
    result = asyncio.run(LocalRunner(config, tmp_path / "attempts").run(spec))
    assert result.status is RolloutStatus.TIMED_OUT and result.sandbox is None
    assert all(wait_dead(int(p)) for p in (result.workdir / "pids").read_text().split())


@needs_bwrap
def test_cancelling_an_attempt_with_an_open_gateway_connection_is_clean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gateway, hits = _listener()
    port = gateway.getsockname()[1]
    code = f"import socket, time; s = socket.create_connection(('127.0.0.1', {port})); print('in', flush=True); " \
           "time.sleep(60)"
    config = RunnerConfig(command=[sys.executable, "-c", code], sandbox="bubblewrap")
    runner = LocalRunner(config, tmp_path / "attempts")
    spec = make_attempt_spec(config, rollout_id="c1", task_id="t", task_input={},
                             gateway_url=f"http://127.0.0.1:{port}", api_key="k")

    async def main() -> None:
        task = asyncio.create_task(runner.run(spec))
        while not hits:
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    gateway.close()
    assert "Exception in callback" not in caplog.text and "Traceback" not in caplog.text
    assert wait_gone(code)


def test_relay_folders_left_by_killed_controllers_are_swept(tmp_path: Path) -> None:
    """A folder whose socket no process has bound and that is old enough goes; a live relay (socket bound,
    however old), a young folder (its controller may not have bound yet) and other folders stay."""
    old = time.time() - 2 * sandbox_mod.STALE_BRIDGE_S

    def bridge(name: str, *, listening: bool, age: float | None) -> tuple[Path, socket.socket]:
        folder = tmp_path / f"{sandbox_mod.BRIDGE_PREFIX}{name}"
        folder.mkdir()
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(folder / sandbox_mod.BRIDGE_SOCKET))
        if listening:
            s.listen()
        else:
            s.close()  # its controller was killed: the socket file stays, bound by no one
        if age is not None:
            os.utime(folder, (age, age))
        return folder, s

    dead, _ = bridge("dead", listening=False, age=old)
    live, live_sock = bridge("live", listening=True, age=old)
    young, _ = bridge("young", listening=False, age=None)
    other = tmp_path / "hrl-other"
    other.mkdir()
    os.utime(other, (old, old))
    try:
        assert sandbox_mod.sweep_stale_bridges(tmp_path) == [dead]
        assert not dead.exists() and live.exists() and young.exists() and other.exists()
        assert sandbox_mod.sweep_stale_bridges(tmp_path) == []
    finally:
        live_sock.close()
