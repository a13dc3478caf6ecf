"""Attempts in their task's container: built once, run with the gateway as the only network, graded by the
task's tests in the same container or a clean one, limits applied, nothing left behind."""

from __future__ import annotations

import asyncio
import http.server
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessrl.environments.engine import LABEL_RUN, Engine, EngineUnavailable, find_engine
from harnessrl.harbor.load import load_harbor_tasks
from harnessrl.rewards.container_grading import grade_attempt
from harnessrl.runners import AttemptResult, RunnerConfig, make_attempt_spec, make_runner
from harnessrl.types import FailureKind, RolloutStatus

sys.path.insert(0, str(Path(__file__).parent))
from conftest import harbor_task  # noqa: E402

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]


def run_attempts(tmp: Path, task_dir: Path, command: list[str], *, n: int = 1, grading: str = "same",
                 gateway: str = "http://127.0.0.1:9", run_id: str = "t", hide: tuple[Path, ...] = (), **runner: Any) -> list[tuple[AttemptResult, Any]]:
    """``n`` attempts of the task at once; each result with its grade (None when it has no container)."""
    (task,) = load_harbor_tasks(task_dir, tmp / "cache", runner_timeout_s=60, verifier_timeout_s=60, container=True)
    cfg = RunnerConfig.model_validate({"environment": "container", "command": command, "timeout_s": 60,
                                       "concurrency": max(n, 1), "container": {"grading": grading}, **runner})

    async def main() -> list[tuple[AttemptResult, Any]]:
        r = make_runner(cfg, tmp / "attempts", run_id=run_id, hide=hide)

        async def one(i: int) -> tuple[AttemptResult, Any]:
            spec = make_attempt_spec(cfg, rollout_id=f"{run_id}-{i}", task_id=task.id, task_input=task.input,
                                     gateway_url=gateway, api_key="sk-rollout-key", assets=task.assets)
            res = await r.run(spec)
            grade = None
            if res.box is not None:
                assert task.assets.environment is not None
                grade = await grade_attempt(res.box, task.assets.environment, timeout_s=60)
            await r.release(res)
            return res, grade
        return list(await asyncio.gather(*(one(i) for i in range(n))))
    return asyncio.run(main())


def containers_of(engine: Engine, run_id: str) -> list[str]:
    done = asyncio.run(engine.run("ps", "-a", "--filter", f"label={LABEL_RUN}={run_id}", "--format", "{{.Names}}"))
    return done.text.split()


def test_a_harbor_task_runs_in_its_image_and_is_graded_there_in_both_modes(engine: Engine, tmp_path: Path) -> None:
    task = harbor_task(tmp_path, "copy")
    for grading in ("same", "clean"):
        [(res, grade)] = run_attempts(tmp_path, task, ["sh", "-c", "cp data.txt answer.txt; pwd; echo $OPENAI_API_KEY"],
                                      grading=grading, run_id=f"both-{grading}")
        assert res.status is RolloutStatus.SUCCEEDED, res.reason
        assert res.stdout.split() == ["/app", "sk-rollout-key"]  # the image's WORKDIR; the rollout's key
        assert grade.value == 1.0, grade
        [(res, grade)] = run_attempts(tmp_path, task, ["true"], grading=grading, run_id=f"none-{grading}")
        assert grade.value == 0.0, grade
    assert containers_of(engine, "both-same") == [] and containers_of(engine, "both-clean") == []


def test_the_image_is_built_once_per_task_content(engine: Engine, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    task = harbor_task(tmp_path, "once")
    caplog.set_level("INFO", "harnessrl.environments.images")
    results = run_attempts(tmp_path, task, ["sh", "-c", "cp data.txt answer.txt"], n=3, run_id="once")
    assert [g.value for _, g in results] == [1.0] * 3
    builds = [r for r in caplog.records if "building the image" in r.getMessage()]
    assert len(builds) <= 1  # 0 when an earlier run built the same content
    (task / "environment" / "data.txt").write_text("43\n")  # new content: a new image, and the check now fails
    [(_, grade)] = run_attempts(tmp_path, task, ["sh", "-c", "cp data.txt answer.txt"], run_id="once2")
    assert grade.value == 0.0


def test_red_team_a_tampering_agent_passes_same_container_grading_and_gets_0_when_clean(
        engine: Engine, tmp_path: Path) -> None:
    """The agent never solves the task: it puts a fake python3 first on PATH (the tests' interpreter) and
    leaves a process behind that keeps writing reward 1. In its own container that wins (Harbor's
    semantics, which trust the container); in a clean one only /app travels, and the tests see the truth."""
    task = harbor_task(tmp_path, "tamper")
    tamper = ("printf '#!/bin/sh\\necho 1.0\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3; "
              "nohup sh -c 'while true; do mkdir -p /logs/verifier; echo 1.0 > /logs/verifier/reward.txt; "
              "sleep 0.05; done' >/dev/null 2>&1 & echo tampered")
    [(res, same)] = run_attempts(tmp_path, task, ["sh", "-c", tamper], grading="same", run_id="rt-same")
    assert res.status is RolloutStatus.SUCCEEDED and "tampered" in res.stdout
    assert same.value == 1.0  # the same container trusts what the agent did to it
    [(res, clean)] = run_attempts(tmp_path, task, ["sh", "-c", tamper], grading="clean", run_id="rt-clean")
    assert clean.value == 0.0, clean


@pytest.fixture
def fake_gateway() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server standing in for the gateway (its paths are recorded), and a second loopback
    server that no attempt may reach."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            body = b'{"object": "list", "data": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{servers[0].server_port}", [*seen, f"other:{servers[1].server_port}"]
    for s in servers:
        s.shutdown()


PROBE = """
import json, os, socket, sys, urllib.request
out = {}
url = os.environ["OPENAI_BASE_URL"] + "/models"
out["gateway"] = json.load(urllib.request.urlopen(url, timeout=10))["object"]
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close(); return "reached"
    except OSError as exc:
        return type(exc).__name__
out["other_loopback"] = reach("127.0.0.1", int(sys.argv[1]))
out["host_via_slirp"] = reach("10.0.2.2", int(sys.argv[1]))
out["internet"] = reach("1.1.1.1", 53)
out["host_file"] = os.path.exists(sys.argv[2])
out["processes"] = sorted({open(f"/proc/{p}/cmdline").read().split(chr(0))[0].rsplit("/", 1)[-1]
                           for p in os.listdir("/proc") if p.isdigit()})
print(json.dumps(out))
"""


def test_the_gateway_is_the_only_network_and_the_host_is_not_there(
        engine: Engine, tmp_path: Path, fake_gateway: tuple[str, list[str]]) -> None:
    url, info = fake_gateway
    other_port = int(info[-1].split(":")[1])
    secret = tmp_path / "runs" / "store.sqlite"  # the run's store, elsewhere on the host
    secret.parent.mkdir()
    secret.write_text("recorded prompts")
    harness = tmp_path / "harness"  # the harness's folder is mounted read-only; a config beside it is masked
    harness.mkdir()
    (harness / "probe.py").write_text(PROBE)
    (harness / "config.toml").write_text('store = "postgresql://user:password@db/runs"')
    task = harbor_task(tmp_path, "net")
    probe = PROBE + "print(json.dumps({'config': open(sys.argv[3]).read()}))\n"
    (harness / "probe.py").write_text(probe)
    [(res, _)] = run_attempts(tmp_path, task, [sys.executable, str(harness / "probe.py"), str(other_port),
                                               str(secret), str(harness / "config.toml")], gateway=url, run_id="net",
                              hide=(harness / "config.toml", secret.parent))
    assert res.status is RolloutStatus.SUCCEEDED, res.stderr
    import json
    out = json.loads(res.stdout.strip().splitlines()[-2])
    assert json.loads(res.stdout.strip().splitlines()[-1])["config"] == ""  # masked: /dev/null
    assert out["gateway"] == "list"  # through the relay, at the URL the harness was given
    assert out["other_loopback"] != "reached" and out["host_via_slirp"] != "reached" and out["internet"] != "reached"
    assert out["host_file"] is False  # the host's files (a store beside the config) are not in the container
    assert not {"podman", "conmon", "harnessrl", "pytest"} & set(out["processes"])  # its own processes only


def test_a_harness_past_its_timeout_is_stopped_with_everything_it_started(engine: Engine, tmp_path: Path) -> None:
    task = harbor_task(tmp_path, "slow", toml="[agent]\ntimeout_sec = 3\n[verifier]\ntimeout_sec = 30\n")
    started = time.monotonic()
    [(res, grade)] = run_attempts(tmp_path, task, ["sh", "-c", "(sleep 600 &); cp data.txt answer.txt; sleep 600"],
                                  run_id="slow")
    assert res.status is RolloutStatus.TIMED_OUT and res.failure_kind is FailureKind.AGENT
    assert time.monotonic() - started < 60
    assert grade.value == 1.0  # Harbor grades a timed-out attempt too: what it did before is there
    assert containers_of(engine, "slow") == []


def test_a_fork_bomb_stops_at_the_pid_limit_and_spares_the_other_attempts(engine: Engine, tmp_path: Path) -> None:
    task = harbor_task(tmp_path, "bomb", toml="[agent]\ntimeout_sec = 8\n[verifier]\ntimeout_sec = 30\n")
    bomb = ["sh", "-c", 'if [ "$HARNESSRL_ROLLOUT_ID" = bomb-0 ]; then b() { b | b & }; b; sleep 30; '
                        'else sleep 2; cp data.txt answer.txt; fi']
    results = run_attempts(tmp_path, task, bomb, n=2, run_id="bomb", container={"pids_limit": 64})
    (bombed, _), (other, grade) = results
    assert bombed.status in (RolloutStatus.TIMED_OUT, RolloutStatus.FAILED)
    assert other.status is RolloutStatus.SUCCEEDED and grade.value == 1.0
    assert containers_of(engine, "bomb") == []


def test_an_image_that_fails_to_build_is_an_infra_failure_with_the_log_tail(engine: Engine, tmp_path: Path) -> None:
    task = harbor_task(tmp_path, "broken", dockerfile="FROM python:3.11-slim\nRUN echo the-build-broke && false\n")
    results = run_attempts(tmp_path, task, ["true"], n=2, run_id="broken")
    for res, grade in results:
        assert res.status is RolloutStatus.FAILED and res.failure_kind is FailureKind.INFRA
        assert "image build failed" in (res.reason or "") and "the-build-broke" in (res.reason or "")
        assert grade is None


def test_no_engine_is_one_clear_error_naming_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither podman nor docker on PATH
    with pytest.raises(EngineUnavailable, match="podman: not installed; docker: not installed"):
        find_engine("auto")
    with pytest.raises(EngineUnavailable, match='environment = "host"'):
        make_runner(RunnerConfig.model_validate({"environment": "container"}), tmp_path)


def test_a_killed_controllers_containers_are_swept_by_the_next_start(engine: Engine, tmp_path: Path) -> None:
    """A controller SIGKILLed mid-attempt leaves its container running; the next runner's start removes it."""
    import signal
    import subprocess
    task = harbor_task(tmp_path, "killed")
    script = tmp_path / "controller.py"
    script.write_text(f"""
import asyncio, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_container_attempts import run_attempts
from pathlib import Path
run_attempts(Path({str(tmp_path)!r}), Path({str(task)!r}), ["sleep", "600"], run_id="killed-a")
""")
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ}, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not containers_of(engine, "killed-a") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert containers_of(engine, "killed-a"), "the controller never started its attempt"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert containers_of(engine, "killed-a")  # left behind
    run_attempts(tmp_path, task, ["true"], run_id="killed-b")  # another run starts on this machine
    assert containers_of(engine, "killed-a") == []


def test_a_disk_filling_agent_is_stopped_at_its_storage_limit_and_the_other_attempt_is_not(
        engine: Engine, tmp_path: Path) -> None:
    task = harbor_task(tmp_path, "fill", toml="[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n"
                                              "[environment]\nstorage_mb = 64\n")
    fill = ["sh", "-c", 'if [ "$HARNESSRL_ROLLOUT_ID" = fill-0 ]; then '
                        "while true; do head -c 8388608 /dev/zero >> /tmp/fill; done; "
                        "else sleep 3; cp data.txt answer.txt; fi"]
    started = time.monotonic()
    (filled, _), (other, grade) = run_attempts(tmp_path, task, fill, n=2, run_id="fill")
    assert filled.status is RolloutStatus.FAILED and filled.failure_kind is FailureKind.AGENT
    assert "past its storage limit of 64 MB" in (filled.reason or "")
    assert time.monotonic() - started < 50  # stopped by the limit, not by the 60 s timeout
    assert other.status is RolloutStatus.SUCCEEDED and grade.value == 1.0
    assert containers_of(engine, "fill") == []


def test_an_image_without_the_hosts_c_library_is_refused_saying_why(engine: Engine, tmp_path: Path) -> None:
    """The host's Python (PID 1, the relay, a mounted venv) needs glibc: a musl or empty image cannot run it."""
    empty = tmp_path / "empty.tar"
    import tarfile
    with tarfile.open(empty, "w"):
        pass
    asyncio.run(engine.run("import", str(empty), "localhost/harnessrl-test/scratch:latest"))
    task = harbor_task(tmp_path, "scratch", dockerfile="FROM localhost/harnessrl-test/scratch:latest\n",
                       toml='[environment]\ndocker_image = "localhost/harnessrl-test/scratch:latest"\n')
    [(res, grade)] = run_attempts(tmp_path, task, ["true"], run_id="scratch")
    assert res.status is RolloutStatus.FAILED and res.failure_kind is FailureKind.INFRA
    assert "did not stay up" in (res.reason or "") and "glibc-based image" in (res.reason or "")
    assert grade is None and containers_of(engine, "scratch") == []


def test_a_reward_file_the_agent_wrote_is_removed_before_the_tests_run(engine: Engine, tmp_path: Path) -> None:
    """Tests that write no reward are a grading failure, never the agent's own reward.txt (Harbor deletes it)."""
    task = harbor_task(tmp_path, "forged", test_sh="#!/bin/bash\ntrue\n")
    forge = ["sh", "-c", "mkdir -p /logs/verifier && echo 1.0 > /logs/verifier/reward.txt"]
    [(_, grade)] = run_attempts(tmp_path, task, forge, grading="same", run_id="forged")
    assert grade.value is None and "wrote no reward" in (grade.error or "")
