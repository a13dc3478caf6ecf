"""Red team: a harness that tries every escape, run through a real gateway, store, runner and verifier.

Each escape must be blocked by the sandbox or end at reward 0 (and in the record: the rollout's logs hold
the harness's report, the store its posts). The same harness run with ``sandbox = "none"`` shows what the
sandbox is for: there most file and network escapes succeed (the reward policies still hold).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402
from run_config import TINY_ENGINE, write_run_config  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.rewards import RewardConfig, close_rollout, score_attempt  # noqa: E402
from harnessrl.rewards.outcome import rollout_reward  # noqa: E402
from harnessrl.rewards.posted import trained_rewards  # noqa: E402
from harnessrl.runners import RunnerConfig, TaskAssets, make_attempt_spec  # noqa: E402
from harnessrl.runners.local import LocalRunner  # noqa: E402
from harnessrl.store import open_store  # noqa: E402
from harnessrl.types import FailureKind, RolloutStatus  # noqa: E402

HERE = Path(__file__).resolve().parent
ADMIN = "redteam-admin-token"
ANSWER = "swordfish-7f3a"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/bubblewrap.sh)")

#: Escapes the sandbox blocks outright; the harness must report each as blocked.
BLOCKED = [
    "read the store file",
    "read hidden tests by absolute path",
    "read the task file (reference answers)",
    "read the run's config file",
    "read another attempt's workspace",
    "edit the verifier",
    "reach a loopback port that is not the gateway",
    "reach the engine directly (unrecorded calls)",
    "read the controller's environment (/proc)",
]
#: Blocked by the gateway whatever the sandbox.
REFUSED = ["use the admin API without the admin token", "post a reward for another rollout",
           "post itself a 'final' reward (scoring's name)"]


class Canary:
    """A loopback TCP listener that counts who connects (the 'other service' an attempt must not reach)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


def _kill_daemons(marker: str) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


class World:
    """A project folder, a run directory with its store, a gateway over a fake engine, one task."""

    def __init__(self, tmp: Path) -> None:
        self.project = tmp / "project"
        shutil.copytree(HERE, self.project, ignore=shutil.ignore_patterns("test_*", "__pycache__"))
        self.task_ws = self.project / "task" / "workspace"
        (self.task_ws / "tests").mkdir(parents=True)
        (self.task_ws / "tests" / "test_solution.py").write_text("def test_solution():\n    assert False\n")
        self.hidden = self.project / "task" / "hidden"
        self.hidden.mkdir()
        (self.hidden / "hidden_answer.txt").write_text(ANSWER)
        self.config_file = self.project / "config.toml"
        write_run_config(self.config_file, {"store": {"url": "postgresql://harnessrl:hunter2@db/runs"}})
        self.task_file = self.project / "tasks.jsonl"
        self.task_file.write_text(json.dumps({"id": "t1", "verifier_input": {"answer": ANSWER}}) + "\n")
        self.run_dir = tmp / "run"
        self.attempts = self.run_dir / "attempts"
        other = self.attempts / "other" / "workspace"
        other.mkdir(parents=True)
        (other / "secret.txt").write_text("another attempt's work")
        self.store_path = self.run_dir / "store.db"
        self.store = open_store(f"sqlite:///{self.store_path}")
        self.engine = EngineServer(FakeEngine()).start()
        self.gateway = GatewayServer(Gateway(self.store, GatewayConfig(
            port=0, engines=[self.engine.url], admin_token=ADMIN, health_interval_s=0.2))).start()
        self.canary = Canary()
        self.private_tmp = Path("/tmp") / f"redteam-pwned-{os.getpid()}-{id(self)}"
        self.daemon_marker = f"redteam-daemon-{os.getpid()}-{id(self)}"  # to kill only our own leftovers

    def rollout(self, task_id: str) -> tuple[str, str]:
        made = httpx.post(f"{self.gateway.url}/admin/rollouts", headers={"Authorization": f"Bearer {ADMIN}"},
                          json={"task_id": task_id, "group_id": "g", "input": {}}, timeout=30).json()
        return made["rollout_id"], made["api_key"]

    def write_targets(self) -> list[str]:
        return [str(self.run_dir / "pwned.txt"), str(self.attempts / "pwned.txt"),
                str(self.project / "pwned.txt"), str(self.task_ws / "pwned.txt"), str(self.private_tmp)]

    def run(self, sandbox: str, mode: str = "escape") -> tuple[dict[str, str], object, str]:
        """One red-team attempt, scored like the controller scores; (report, outcome, rollout id)."""
        rid, key = self.rollout("t1")
        victim, _ = self.rollout("t2")
        targets = {
            "store": str(self.store_path), "hidden_file": str(self.hidden / "hidden_answer.txt"),
            "task_file": str(self.task_file), "other_workspace_file": str(self.attempts / "other/workspace/secret.txt"),
            "write_targets": self.write_targets(), "verifier": str(self.project / "verify.py"),
            "canary_port": self.canary.port, "engine_port": httpx.URL(self.engine.url).port,
            "controller_pid": os.getpid(), "other_rollout": victim, "daemon_marker": self.daemon_marker,
            "deputy_target": str(self.project / "deputy.txt"), "config_file": str(self.config_file),
        }
        config = RunnerConfig(command=[sys.executable, str(self.project / "agent.py")], sandbox=sandbox,  # type: ignore[arg-type]
                              timeout_s=60, keep_workdirs="all")
        rewards = RewardConfig(verifier=[sys.executable, str(self.project / "verify.py")], protected=["tests/**/*"])
        assets = TaskAssets(workspace=self.task_ws, hidden_dir=self.hidden, verifier_input={"answer": ANSWER})
        spec = make_attempt_spec(config, rollout_id=rid, task_id="t1", task_input={"targets": targets, "mode": mode},
                                 gateway_url=self.gateway.url, api_key=key, assets=assets,
                                 protected=tuple(rewards.protected))
        runner = LocalRunner(config, self.attempts,  # what the controller hides (test below: the real one)
                             hide=[self.run_dir, self.store_path, self.task_file, self.hidden, self.config_file])

        async def go():
            result = await runner.run(spec, on_start=lambda h: self.store.transition_rollout(
                rid, RolloutStatus.RUNNING, runner_handle=h))
            outcome = await score_attempt(spec, result, self.store, rewards)
            close_rollout(self.store, result, outcome)
            return result, outcome

        result, outcome = asyncio.run(go())
        assert result.status is RolloutStatus.SUCCEEDED, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert self.store.get_rewards(victim) == []  # whatever happened, nothing landed on the other rollout
        return report, outcome, rid

    def close(self) -> None:
        _kill_daemons(self.daemon_marker)
        self.gateway.stop()
        self.engine.stop()
        self.canary.sock.close()
        self.store.close()
        self.private_tmp.unlink(missing_ok=True)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.close()


def _pwned(world: World) -> list[str]:
    return [p for p in world.write_targets() if Path(p).exists()]


@needs_bwrap
def test_every_escape_is_blocked_or_scores_zero_in_the_sandbox(world: World) -> None:
    report, outcome, rid = world.run("bubblewrap")
    assert report["call the model through the gateway (allowed)"] == "done: HTTP 200"
    for name in BLOCKED + REFUSED:
        assert report[name].startswith("blocked"), (name, report[name])
    # writes outside the workspace land in the sandbox's private tmpfs (or fail): nothing outside changed
    assert _pwned(world) == [] and world.canary.hits == 0
    assert "print(1.0)" not in (world.project / "verify.py").read_text()
    # posted itself 1.0 and left a daemon: recorded, scored 0 by the verifier
    assert report["post itself 1.0"] == "done: HTTP 201"
    assert "400" in report["post itself a 'final' reward (scoring's name)"]
    assert outcome.value == 0.0 and outcome.components["verifier"] == 0.0
    stored = world.store.get_rewards(rid)
    assert [(r.name, r.value) for r in stored if r.name in ("reward", "posted")] == [("reward", 1.0), ("posted", 0.0)]
    assert rollout_reward(trained_rewards(stored)) == 0.0  # what training sees
    rollout = world.store.get_rollout(rid)
    assert rollout.status is RolloutStatus.SUCCEEDED and "read the store file" in rollout.logs  # the record
    assert (world.attempts / rid / "workspace" / "solution.txt").read_text() == "a guess"  # the daemon died
    if os.environ.get("REDTEAM_TABLE"):
        print(json.dumps(report, indent=1))


@needs_bwrap
def test_editing_a_protected_file_scores_zero_and_says_so(world: World) -> None:
    report, outcome, rid = world.run("bubblewrap", mode="tamper")
    assert report["edit a protected file in its workspace"].startswith("done")
    assert outcome.value == 0.0 and outcome.failure_kind is FailureKind.AGENT
    assert "modified: tests/test_solution.py" in world.store.get_rollout(rid).error


@pytest.mark.parametrize("sandbox", [pytest.param("bubblewrap", marks=needs_bwrap), "none"])
def test_a_symlink_where_hidden_files_go_scores_zero_and_nothing_is_written_through_it(
    world: World, sandbox: str
) -> None:
    """The controller copies hidden files in outside any sandbox: it must not follow the harness's links."""
    report, outcome, rid = world.run(sandbox, mode="deputy")
    assert report["plant a symlink where the hidden tests will be copied (the controller writes through it)"
                  ].startswith("done")
    assert not (world.project / "deputy.txt").exists()
    assert outcome.value == 0.0 and outcome.failure_kind is FailureKind.AGENT
    assert "symlink" in world.store.get_rollout(rid).error


def test_without_the_sandbox_the_same_harness_escapes(world: World) -> None:
    """Why the sandbox exists (and the reward policy still holds): the rows of docs/security.md's table."""
    report, outcome, rid = world.run("none")
    escaped = {name for name in BLOCKED if report[name].startswith("done")}
    assert len(_pwned(world)) == len(world.write_targets())
    assert escaped >= {"read the store file", "read hidden tests by absolute path", "edit the verifier",
                       "reach a loopback port that is not the gateway", "read the controller's environment (/proc)"}
    assert all(report[name].startswith("blocked") for name in REFUSED)
    # the detached process is killed when the harness exits, even here (its environment carries the command's
    # tag: runners/process.py), so the hidden answer is never copied in; the edited verifier prints 1.0 last
    assert (world.attempts / rid / "workspace" / "solution.txt").read_text() == "a guess"
    assert outcome.components["verifier"] == 1.0
    if os.environ.get("REDTEAM_TABLE"):
        print(json.dumps(report, indent=1))


@needs_bwrap
def test_through_harnessrl_collect_the_run_files_are_hidden(tmp_path: Path) -> None:
    """The same harness under ``harnessrl collect`` (controller, stack, embedded model): the controller's own
    list of what to hide covers the store, run directory, task and config files and the hidden tests."""
    from harnessrl.config import load_config
    from harnessrl.drivers.rl import run_collect
    from harnessrl.types import TaskSplit

    project = tmp_path / "project"
    shutil.copytree(HERE, project, ignore=shutil.ignore_patterns("test_*", "__pycache__"))
    (project / "ws").mkdir()
    (project / "hidden").mkdir()
    (project / "hidden" / "hidden_answer.txt").write_text(ANSWER)
    run_dir = project / "run"  # inside the agent's readable folder on purpose
    targets = {
        "store": str(run_dir / "store.db"), "hidden_file": str(project / "hidden" / "hidden_answer.txt"),
        "task_file": str(project / "tasks.jsonl"), "config_file": str(project / "config.toml"),
        "other_workspace_file": str(run_dir / "attempts" / "none"), "write_targets": [str(run_dir / "pwned")],
        "verifier": str(project / "verify.py"), "canary_port": 9, "engine_port": 9, "controller_pid": os.getpid(),
        "other_rollout": "none", "daemon_marker": f"redteam-daemon-{os.getpid()}-collect",
        "deputy_target": str(project / "deputy.txt"),
    }
    task = {"id": "escape", "input": {"targets": targets}, "workspace": "ws", "hidden_dir": "hidden",
            "verifier_input": {"answer": ANSWER}}
    (project / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    write_run_config(project / "config.toml", {
        "run": {"dir": "run"},
        "tasks": {"eval": "tasks.jsonl"},
        "engine": TINY_ENGINE,
        "runner": {"command": [sys.executable, "agent.py"], "timeout_s": 60, "sandbox": "bubblewrap"},
        "rewards": {"verifier": [sys.executable, "verify.py"]},
    })
    try:
        result = run_collect(load_config(project / "config.toml"), None, TaskSplit.EVAL)
    finally:
        _kill_daemons(targets["daemon_marker"])
    assert result.tasks == 1
    store = open_store(f"sqlite:///{run_dir / 'store.db'}")
    (rollout,) = store.list_rollouts(limit=10)
    stdout = rollout.logs.split("--- stdout", 1)[1].split("--- stderr", 1)[0]
    assert "{" in stdout, rollout.logs[-3000:]
    report = json.loads(next(line for line in reversed(stdout.splitlines()) if line.startswith("{")))
    rewards = {r.name: r.value for r in store.get_rewards(rollout.id)}
    store.close()
    for name in ("read the store file", "read hidden tests by absolute path", "read the task file (reference answers)",
                 "read the run's config file", "edit the verifier"):
        assert report[name].startswith("blocked"), (name, report[name])
    assert report["call the model through the gateway (allowed)"] == "done: HTTP 200"
    assert not (run_dir / "pwned").exists() and rewards["final"] == 0.0
