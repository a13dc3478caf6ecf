"""Harbor task folders through the real path: ``load_tasks`` from a run config, the local runner (with and
without the bubblewrap sandbox), then ``score_attempt`` running each task's ``tests/test.sh`` as its verifier.

The shipped tasks (examples/harbor/tasks) score 1 with their own ``solution/solve.sh`` (the oracle harness)
and 0 with a harness that does nothing. No model: the harness never calls the gateway.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.config import HarnessConfig, load_config
from harnessrl.harbor.load import VERIFIER_COMMAND
from harnessrl.rewards import RewardOutcome, score_attempt
from harnessrl.runners import make_attempt_spec, make_runner
from harnessrl.runners.sandbox import resolve_bwrap
from harnessrl.store import Store, open_store
from harnessrl.tasks import LoadedTask, load_tasks
from harnessrl.types import FailureKind, RolloutStatus, TaskSplit

TASKS = Path(__file__).resolve().parents[3] / "examples" / "harbor" / "tasks"
NAMES = sorted(p.name for p in TASKS.iterdir() if p.is_dir())
SANDBOXES = ["none", pytest.param("bubblewrap", marks=pytest.mark.skipif(
    resolve_bwrap("auto") is None, reason="bubblewrap cannot build a sandbox here"))]
ORACLE = [sys.executable, "-I", "-m", "harnessrl.harbor.oracle"]
IDLE = ["true"]  # a harness that does nothing


@pytest.fixture
def store() -> Iterator[Store]:
    s = open_store("sqlite:///:memory:")
    yield s
    s.close()


def harbor_config(tmp_path: Path, tasks: Path, command: list[str], sandbox: str = "none",
                  **rewards: object) -> HarnessConfig:
    return load_config(write_run_config(tmp_path / "cfg", {
        "run": {"dir": str(tmp_path / "run")},
        "tasks": {"train": str(tasks)},
        "runner": {"command": command, "sandbox": sandbox, "timeout_s": 60},
        "rewards": rewards,
    }))


def run_and_score(config: HarnessConfig, store: Store, lt: LoadedTask, tmp_path: Path) -> RewardOutcome:
    """One attempt of ``lt`` as the controller runs it: a rollout, the runner (hiding what it hides), scoring."""
    rollout = store.create_rollout(task_id=lt.task.id, input=lt.task.input, group_id="g", api_key_hash="h")
    spec = make_attempt_spec(config.runner, rollout_id=rollout.id, task_id=lt.task.id, task_input=lt.task.input,
                             gateway_url="http://127.0.0.1:1", api_key="k", assets=lt.assets)
    hide = [config.resolve(config.tasks.train), config.run_dir, lt.assets.hidden_dir]
    runner = make_runner(config.runner, tmp_path / "attempts", hide=[p for p in hide if p is not None])

    async def go() -> RewardOutcome:
        result = await runner.run(spec, on_start=lambda h: store.transition_rollout(
            rollout.id, RolloutStatus.RUNNING, runner_handle=h))
        return await score_attempt(spec, result, store, config.rewards)

    return asyncio.run(go())


def test_example_tasks_load_as_tasks(tmp_path: Path) -> None:
    config = harbor_config(tmp_path, TASKS, IDLE)
    tasks = load_tasks(config, "r1")
    loaded = {lt.task.id: lt for lt in tasks[TaskSplit.TRAIN]}
    assert sorted(loaded) == NAMES == ["count-errors", "fix-mean", "write-greeting"]
    assert tasks[TaskSplit.EVAL] == []
    fix = loaded["fix-mean"]
    # the instruction is the input; /app (the Dockerfile's WORKDIR) became the harness's cwd
    assert fix.task.input["instruction"].startswith("`mean` in ./stats.py returns")
    assert "/app" not in fix.task.input["instruction"]
    assert fix.assets.workspace is not None and fix.assets.hidden_dir is not None
    assert [p.name for p in fix.assets.workspace.iterdir()] == ["stats.py"]
    assert (fix.assets.hidden_dir / ".harbor" / "tests" / "test.sh").is_file()
    assert config.run_dir in fix.assets.workspace.parents  # never beside the tasks, which attempts must not see
    assert fix.assets.verifier == VERIFIER_COMMAND
    harbor = dict(fix.assets.verifier_input or {})["harbor"]
    assert harbor["workdir"] == "/app" and harbor["timeout_sec"] == 30.0
    assert harbor["note"] == "environment/Dockerfile not built; ran on the host; not carried out: FROM python:3.11-slim"
    # server.log is copied by `COPY server.log /app/`; nothing from the Dockerfile's RUN line is run
    assert [p.name for p in loaded["count-errors"].assets.workspace.iterdir()] == ["server.log"]  # type: ignore[union-attr]


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", NAMES)
def test_each_task_scores_1_with_its_solution_and_0_without(tmp_path: Path, store: Store, name: str,
                                                             sandbox: str) -> None:
    # the oracle reads the solution from a copy: the sandbox hides the configured task folders from attempts
    solutions = tmp_path / "solutions"
    shutil.copytree(TASKS, solutions)
    solved = harbor_config(tmp_path / "a", TASKS, [*ORACLE, str(solutions)], sandbox)
    idle = harbor_config(tmp_path / "b", TASKS, IDLE, sandbox)
    for config, expected in ((solved, 1.0), (idle, 0.0)):
        lt = next(t for t in load_tasks(config, "r1")[TaskSplit.TRAIN] if t.task.id == name)
        outcome = run_and_score(config, store, lt, tmp_path / str(expected))
        assert outcome.failure_kind is not FailureKind.INFRA, outcome.reason
        assert outcome.value == expected, outcome.verifier_output
        assert outcome.components["verifier"] == expected
        log = outcome.verifier_output or ""
        assert f"harbor task {name}: environment/Dockerfile not built; ran on the host" in log


def test_reward_json_numbers_are_reported(tmp_path: Path, store: Store) -> None:
    config = harbor_config(tmp_path, TASKS, IDLE)
    lt = next(t for t in load_tasks(config, "r1")[TaskSplit.TRAIN] if t.task.id == "count-errors")
    outcome = run_and_score(config, store, lt, tmp_path)
    assert outcome.value == 0.0
    assert 'reward.json {"reward": 0.0, "answered": 0.0}' in (outcome.verifier_output or "")


@pytest.mark.parametrize(("verifier_timeout_s", "value", "says"), [
    (30.0, 0.0, "tests ran past the task's [verifier] timeout_sec = 1s: reward 0"),
    (4.0, None, "tests ran past [rewards] verifier_timeout_s before the task's own"),
])
def test_hanging_tests_score_0_at_the_tasks_limit_and_fail_at_scorings(
        tmp_path: Path, store: Store, verifier_timeout_s: float, value: float | None, says: str) -> None:
    """The agent's code may hang the tests: 0 at the task's own limit. Stopped earlier by [rewards]
    verifier_timeout_s, they say nothing about the agent: an infra failure naming the setting to raise."""
    task = tmp_path / "tasks" / "hang"
    shutil.copytree(TASKS / "write-greeting", task)
    timeout = "1.0" if value == 0.0 else "30.0"
    (task / "task.toml").write_text(f"[verifier]\ntimeout_sec = {timeout}\n")
    (task / "tests" / "test.sh").write_text("sleep 20 & wait\necho 1 > /logs/verifier/reward.txt\n")
    config = harbor_config(tmp_path, task, IDLE, verifier_timeout_s=verifier_timeout_s)
    outcome = run_and_score(config, store, load_tasks(config, "r1")[TaskSplit.TRAIN][0], tmp_path)
    assert outcome.value == value
    if value is None:
        assert outcome.failure_kind is FailureKind.INFRA and says in (outcome.reason or "")
    else:
        assert says in (outcome.verifier_output or "")


def test_a_tasks_own_agent_timeout_stops_the_harness_there(tmp_path: Path, store: Store) -> None:
    """``[agent] timeout_sec`` applies per task, in place of ``[runner] timeout_s`` (60 s here)."""
    task = tmp_path / "slow-task"
    shutil.copytree(TASKS / "write-greeting", task)
    (task / "task.toml").write_text("[agent]\ntimeout_sec = 1.5\n")
    config = harbor_config(tmp_path, task, ["sleep", "30"])
    (lt,) = load_tasks(config, "r1")[TaskSplit.TRAIN]
    assert lt.assets.timeout_s == 1.5
    rollout = store.create_rollout(task_id=lt.task.id, input=lt.task.input, group_id="g", api_key_hash="h")
    spec = make_attempt_spec(config.runner, rollout_id=rollout.id, task_id=lt.task.id, task_input=lt.task.input,
                             gateway_url="http://127.0.0.1:1", api_key="k", assets=lt.assets)
    assert spec.timeout_s == 1.5
    runner = make_runner(config.runner, tmp_path / "attempts")
    result = asyncio.run(runner.run(spec))
    assert result.status == RolloutStatus.TIMED_OUT and "timeout of 1.5s" in (result.reason or "")
    # a task without one keeps the runner's
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30.0\n")
    other = harbor_config(tmp_path / "b", task, IDLE)
    (lt,) = load_tasks(other, "r1")[TaskSplit.TRAIN]
    assert lt.assets.timeout_s is None
    assert make_attempt_spec(other.runner, rollout_id="r2", task_id=lt.task.id, task_input=lt.task.input,
                             gateway_url="http://127.0.0.1:1", api_key="k", assets=lt.assets).timeout_s == 60
