"""The local runner with real subprocesses: env, crashes, timeouts, floods, concurrency, cancel, workspaces."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from harnessrl.runners import RunnerConfig, RunnerError, TaskAssets, make_attempt_spec, make_runner
from harnessrl.runners.local import LocalRunner
from harnessrl.types import FailureKind, RolloutStatus

from ._helpers import PY, await_file, script, wait_gone

GW = "http://127.0.0.1:9999"


def make(tmp_path: Path, command: list[str], **cfg: object) -> tuple[LocalRunner, RunnerConfig]:
    config = RunnerConfig(command=command, **cfg)  # type: ignore[arg-type]
    return LocalRunner(config, tmp_path / "attempts"), config


def spec_for(config: RunnerConfig, rid: str = "r1", task_input: dict | None = None, **kw: object):
    return make_attempt_spec(
        config,
        rollout_id=rid,
        task_id="t1",
        task_input=task_input or {},
        gateway_url=GW,
        api_key=f"key-{rid}",
        **kw,  # type: ignore[arg-type]
    )


def test_success_sees_rollout_env_and_task_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "the-users-real-key")
    monkeypatch.setenv("SOME_SECRET", "do-not-leak")
    cmd = script(
        tmp_path,
        "agent.py",
        """
        import json, os, shutil
        seen = dict(os.environ)
        seen["__cwd"] = os.getcwd()
        seen["__file"] = json.load(open(os.environ["HARNESSRL_TASK_INPUT_FILE"]))
        seen["__python"] = shutil.which("python")
        json.dump(seen, open("seen.json", "w"))
        print("hello from the harness")
        """,
    )
    runner, config = make(tmp_path, cmd)
    task_input = {"question": "what is 2+2?", "n": 3, "tags": ["a", "b"]}
    handles: list[str] = []
    result = asyncio.run(runner.run(spec_for(config, "roll-1", task_input), on_start=handles.append))

    assert result.status is RolloutStatus.SUCCEEDED and result.failure_kind is None
    assert result.exit_code == 0 and not result.timed_out
    assert "hello from the harness" in result.stdout
    assert handles == [result.handle] and result.handle.startswith("local:")
    seen = json.loads((result.workdir / "seen.json").read_text())
    assert seen["OPENAI_BASE_URL"] == f"{GW}/r/roll-1/v1"
    assert seen["ANTHROPIC_BASE_URL"] == f"{GW}/r/roll-1"  # no /v1: the anthropic client appends it
    assert seen["OPENAI_API_KEY"] == seen["ANTHROPIC_API_KEY"] == seen["GEMINI_API_KEY"] == "key-roll-1"
    assert seen["GOOGLE_GEMINI_BASE_URL"] == f"{GW}/r/roll-1"
    assert seen["HARNESSRL_REWARD_URL"] == f"{GW}/r/roll-1/reward"
    assert seen["HARNESSRL_ROLLOUT_ID"] == "roll-1" and seen["HARNESSRL_TASK_ID"] == "t1"
    assert json.loads(seen["HARNESSRL_TASK_INPUT"]) == task_input
    assert seen["HARNESSRL_TASK_QUESTION"] == "what is 2+2?"
    assert seen["HARNESSRL_TASK_N"] == "3" and json.loads(seen["HARNESSRL_TASK_TAGS"]) == ["a", "b"]
    assert seen["__file"] == task_input
    assert seen["__cwd"] == str(result.workdir)
    assert "SOME_SECRET" not in seen
    assert seen["__python"] == os.path.join(os.path.dirname(PY), "python")
    assert seen["PYTHONUNBUFFERED"] == "1"


def test_crash_is_an_agent_failure(tmp_path: Path) -> None:
    cmd = script(tmp_path, "crash.py", "import sys; print('boom', file=sys.stderr); sys.exit(3)")
    runner, config = make(tmp_path, cmd)
    result = asyncio.run(runner.run(spec_for(config)))
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.AGENT
    assert result.exit_code == 3 and "code 3" in result.reason
    assert "boom" in result.stderr


def test_death_by_signal_is_named(tmp_path: Path) -> None:
    cmd = script(tmp_path, "segv.py", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    runner, config = make(tmp_path, cmd)
    result = asyncio.run(runner.run(spec_for(config)))
    assert result.failure_kind is FailureKind.AGENT and "SIGSEGV" in result.reason


HANG = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child: only SIGKILL works on both
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", __file__])  # marked
open("pids", "w").write(f"{os.getpid()} {child.pid}")
print("working...", flush=True)
time.sleep(60)
"""


def test_timeout_kills_whole_process_group(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), timeout_s=1.5, kill_grace_s=0.3)
    t0 = time.monotonic()
    result = asyncio.run(runner.run(spec_for(config)))
    assert time.monotonic() - t0 < 10
    assert result.status is RolloutStatus.TIMED_OUT and result.failure_kind is FailureKind.AGENT
    assert result.timed_out and "timeout" in result.reason
    assert "working..." in result.stdout
    assert (result.workdir / "pids").read_text()  # both started
    assert wait_gone(str(tmp_path))  # leader and child (pids inside a sandbox are not ours: by command line)


def test_children_left_behind_are_killed_and_do_not_block(tmp_path: Path) -> None:
    code = """
    import subprocess, sys
    # the child inherits stdout: if we waited for EOF we would wait 60 s
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", __file__])
    open("child", "w").write(str(child.pid))
    """
    runner, config = make(tmp_path, script(tmp_path, "leave.py", code), kill_grace_s=0.5)
    t0 = time.monotonic()
    result = asyncio.run(runner.run(spec_for(config)))
    assert time.monotonic() - t0 < 8
    assert result.status is RolloutStatus.SUCCEEDED
    assert (result.workdir / "child").read_text() and wait_gone(str(tmp_path))


def test_output_flood_is_bounded(tmp_path: Path) -> None:
    code = """
    import sys
    block = b"x" * 1023 + b"\\n"
    for _ in range(20 * 1024):      # 20 MiB on stdout
        sys.stdout.buffer.write(block)
    sys.stdout.buffer.write(b"LAST LINE\\n")
    sys.stderr.buffer.write(b"e" * (5 << 20))
    """
    runner, config = make(tmp_path, script(tmp_path, "flood.py", code), max_log_bytes=4096)
    result = asyncio.run(runner.run(spec_for(config)))
    assert result.status is RolloutStatus.SUCCEEDED
    assert result.stdout_bytes == 20 * 1024 * 1024 + len("LAST LINE\n")
    assert result.stderr_bytes == 5 << 20
    assert result.stdout.endswith("LAST LINE\n")
    assert len(result.stdout.encode()) < 4096 + 100 and len(result.stderr.encode()) < 4096 + 100
    assert "earlier bytes not kept" in result.stdout


def test_concurrency_limit_is_respected_and_reached(tmp_path: Path) -> None:
    code = """
    import time
    start = time.time(); time.sleep(0.4); end = time.time()
    print(start, end)
    """
    runner, config = make(tmp_path, script(tmp_path, "busy.py", code), concurrency=2)

    async def main() -> list:
        return await asyncio.gather(*(runner.run(spec_for(config, f"r{i}")) for i in range(6)))

    results = asyncio.run(main())
    assert all(r.status is RolloutStatus.SUCCEEDED for r in results)
    events = []
    for r in results:
        start, end = map(float, r.stdout.split())
        events += [(start, 1), (end, -1)]
    running = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    assert len(events) == 12 and peak == 2


def test_cancel_running_attempt_kills_its_group(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), timeout_s=60, kill_grace_s=0.2)

    async def main():
        task = asyncio.create_task(runner.run(spec_for(config, "c1")))
        pids = await await_file(tmp_path / "attempts" / "c1" / "workspace" / "pids")
        assert runner.active() == ["c1"]
        assert await runner.cancel("c1") and not await runner.cancel("nope")
        return await task, pids

    t0 = time.monotonic()
    result, pids = asyncio.run(main())
    assert time.monotonic() - t0 < 10
    assert result.status is RolloutStatus.CANCELLED and result.failure_kind is FailureKind.INFRA
    assert pids and wait_gone(str(tmp_path))
    assert runner.active() == []


def test_cancel_queued_attempt_returns_at_once(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), concurrency=1, kill_grace_s=0.2)
    started: list[str] = []

    async def main():
        first = asyncio.create_task(runner.run(spec_for(config, "q1"), on_start=started.append))
        await await_file(tmp_path / "attempts" / "q1" / "workspace" / "pids")
        second = asyncio.create_task(runner.run(spec_for(config, "q2"), on_start=started.append))
        await asyncio.sleep(0.1)
        assert sorted(runner.active()) == ["q1", "q2"]
        await runner.cancel("q2")
        queued = await asyncio.wait_for(second, 5)
        await runner.aclose()
        return queued, await first

    queued, first = asyncio.run(main())
    assert queued.status is RolloutStatus.CANCELLED and "before start" in queued.reason
    assert first.status is RolloutStatus.CANCELLED
    assert len(started) == 1  # the queued one never started a process


def test_cancelling_the_task_kills_the_group(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), timeout_s=60)

    async def main() -> str:
        task = asyncio.create_task(runner.run(spec_for(config, "k1")))
        pids = await await_file(tmp_path / "attempts" / "k1" / "workspace" / "pids")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pids

    pids = asyncio.run(main())
    assert pids and wait_gone(str(tmp_path))


def test_each_attempt_gets_a_fresh_workspace_copy(tmp_path: Path) -> None:
    source = tmp_path / "ws"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "data.txt").write_text("original")
    code = """
    import os, pathlib
    print(sorted(str(p) for p in pathlib.Path(".").rglob("*")))
    print(pathlib.Path("sub/data.txt").read_text())
    pathlib.Path("sub/data.txt").write_text("changed by " + os.environ["HARNESSRL_ROLLOUT_ID"])
    pathlib.Path("mine-" + os.environ["HARNESSRL_ROLLOUT_ID"]).write_text("x")
    """
    runner, config = make(tmp_path, script(tmp_path, "ws.py", code))
    assets = TaskAssets(workspace=source)

    async def main() -> list:
        return await asyncio.gather(*(runner.run(spec_for(config, r, assets=assets)) for r in ("a1", "a2")))

    results = asyncio.run(main())
    first = asyncio.run(runner.run(spec_for(config, "a1", assets=assets)))  # same id again: from scratch
    for r in [*results, first]:
        assert r.status is RolloutStatus.SUCCEEDED
        assert r.stdout.splitlines() == ["['sub', 'sub/data.txt']", "original"]
    assert (source / "sub" / "data.txt").read_text() == "original"
    assert sorted(os.listdir(source)) == ["sub"]


def test_start_failures_are_infra(tmp_path: Path) -> None:
    runner, config = make(tmp_path, ["/nonexistent/harness"])
    result = asyncio.run(runner.run(spec_for(config)))
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.INFRA
    assert "could not start" in result.reason

    runner, config = make(tmp_path, [PY, "-c", "pass"])
    missing = TaskAssets(workspace=tmp_path / "no-such-workspace")
    result = asyncio.run(runner.run(spec_for(config, "r2", assets=missing)))
    assert result.failure_kind is FailureKind.INFRA and "no-such-workspace" in result.reason


def test_on_start_error_kills_process_and_is_infra(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), kill_grace_s=0.1)

    def boom(handle: str) -> None:
        raise RuntimeError("store refused")

    t0 = time.monotonic()
    result = asyncio.run(runner.run(spec_for(config), on_start=boom))
    assert time.monotonic() - t0 < 10
    assert result.failure_kind is FailureKind.INFRA and "store refused" in result.reason


def test_large_task_input_goes_to_the_file_only(tmp_path: Path) -> None:
    code = """
    import json, os
    print("HARNESSRL_TASK_BIG" in os.environ, "HARNESSRL_TASK_INPUT" in os.environ, os.environ["HARNESSRL_TASK_SMALL"])
    print(len(json.load(open(os.environ["HARNESSRL_TASK_INPUT_FILE"]))["big"]))
    """
    runner, config = make(tmp_path, script(tmp_path, "big.py", code), max_env_value_bytes=1000)
    result = asyncio.run(runner.run(spec_for(config, task_input={"big": "y" * 300_000, "small": "s"})))
    assert result.status is RolloutStatus.SUCCEEDED, result.stderr
    assert result.stdout.split() == ["False", "False", "s", "300000"]


def test_release_keeps_what_the_config_says(tmp_path: Path) -> None:
    ok = [PY, "-c", "pass"]
    fail = [PY, "-c", "raise SystemExit(1)"]
    runner, config = make(tmp_path, ok, keep_workdirs="failed")

    async def one(rid: str, command: list[str]) -> Path:
        result = await runner.run(dataclasses.replace(spec_for(config, rid), command=tuple(command)))
        await runner.release(result)
        return result.attempt_dir

    assert not asyncio.run(one("ok", ok)).exists()
    assert asyncio.run(one("bad", fail)).exists()


def test_misuse_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rollout id"):
        spec_for(RunnerConfig(), "../escape")
    assert isinstance(make_runner(RunnerConfig(kind="local"), tmp_path), LocalRunner)
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), kill_grace_s=0.1)

    async def main() -> None:
        task = asyncio.create_task(runner.run(spec_for(config, "dup")))
        await asyncio.sleep(0.05)
        with pytest.raises(RunnerError, match="already running"):
            await runner.run(spec_for(config, "dup"))
        await runner.cancel("dup")
        await task

    asyncio.run(main())


def test_cancelled_waiters_do_not_leak_slots(tmp_path: Path) -> None:
    runner, config = make(tmp_path, script(tmp_path, "hang.py", HANG), concurrency=1, kill_grace_s=0.1)
    quick = dataclasses.replace(spec_for(config, "after"), command=(PY, "-c", "print('ran')"))

    async def main():
        first = asyncio.create_task(runner.run(spec_for(config, "s1")))
        await await_file(tmp_path / "attempts" / "s1" / "workspace" / "pids")
        waiters = [asyncio.create_task(runner.run(spec_for(config, f"w{i}"))) for i in range(3)]
        await asyncio.sleep(0.05)
        waiters[0].cancel()  # the task itself, while queued
        await runner.cancel("w1")  # through the runner, while queued
        await runner.cancel("s1")
        assert (await first).status is RolloutStatus.CANCELLED
        w2 = await asyncio.wait_for(waiters[2], 10)  # got the freed slot: it runs the hang script
        assert w2.status is RolloutStatus.CANCELLED and w2.handle is not None  # it did start
        return await asyncio.wait_for(runner.run(quick), 10)

    async def with_w2_cancelled():
        task = asyncio.create_task(main())
        await await_file(tmp_path / "attempts" / "w2" / "workspace" / "pids", timeout_s=20)
        await runner.cancel("w2")
        return await task

    result = asyncio.run(with_w2_cancelled())
    assert result.stdout == "ran\n" and runner.active() == []
