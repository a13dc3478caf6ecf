"""How a training run starts and ends, shared by ``harnessrl train``, ``harnessrl sft`` and production training.

The prologue, in order: ``open_run_store`` (allocator tuned, run directory made, checkpoints cut short by a
kill removed, store opened), ``register_tasks`` (the run found or created from ``run.json``, its tasks
loaded and recorded), ``preflight`` (harness, verifier and judge start in a second, before a model loads),
``resume_point`` (the last trained step), ``start_training_stack`` (engine, gateway and trainer, with the
checkpoint served and its policy version recorded). The end: ``close_interrupted`` after Ctrl-C, and the
``TrainSummary`` the command prints.

The run directory is the unit of resumption: ``run.json`` names the run in the store, ``checkpoints/``
say which steps are trained, ``events.jsonl`` holds step and evaluation summaries.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harnessrl.memory import tune_allocator
from harnessrl.rewards.judge_client import check_judge
from harnessrl.run_cost import RunCost, cost_lines
from harnessrl.runners.env import base_env
from harnessrl.runners.preflight import check_command
from harnessrl.stack import Stack
from harnessrl.store import Store, open_store
from harnessrl.tasks import LoadedTask, load_tasks
from harnessrl.types import INTERRUPTED, FailureKind, RolloutStatus, TaskSplit
from harnessrl.weights.checkpoints import checkpoint_step, latest_checkpoint
from harnessrl.weights.versions import record_policy_version

if TYPE_CHECKING:
    from harnessrl.config import HarnessConfig
    from harnessrl.controller import EvalResult


def open_run_store(config: HarnessConfig) -> Store:
    """The first lines of every training run; the caller closes the store it returns."""
    tune_allocator()  # before the engine, gateway and trainer threads exist (see harnessrl/memory.py)
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (run_dir / "checkpoints").glob("*.tmp"):
        shutil.rmtree(stale)  # a checkpoint cut short by a kill: that step is not trained
    return open_store(config.store_url)


def open_run(config: HarnessConfig, store: Store) -> str:
    """The run id of this run directory, creating the run on first use."""
    run_dir = config.run_dir
    marker = run_dir / "run.json"
    if marker.is_file():
        run_id = str(json.loads(marker.read_text())["run_id"])
        # NotFound if the store was swapped under the run directory; a resumed run needs its data again
        store.end_run(run_id, ended=False)
        return run_id
    run_id = f"{config.run.name}-{uuid.uuid4().hex[:8]}"
    store.create_run(config.run.name, config.model_dump(mode="json"), run_id=run_id)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": run_id}))
    tmp.rename(marker)
    return run_id


def register_tasks(config: HarnessConfig, store: Store, *,
                   need_train_tasks: bool) -> tuple[str, dict[TaskSplit, list[LoadedTask]]]:
    """The run (``open_run``) and its tasks, recorded in the store; ``need_train_tasks``: none is an error."""
    run_id = open_run(config, store)
    tasks = load_tasks(config, run_id)
    if need_train_tasks and not tasks[TaskSplit.TRAIN]:
        raise ValueError("no training tasks: set [tasks] train = \"tasks.jsonl\" (or a dataset)")
    store.upsert_tasks(run_id, [lt.task for split in tasks.values() for lt in split])
    return run_id, tasks


def preflight(config: HarnessConfig) -> None:
    """Fail in a second, not after the model has loaded, when the harness, the verifier or the judge cannot
    start."""
    runner, rewards = config.runner, config.rewards
    if rewards.judge is not None and rewards.judge.url != "policy":  # "policy" is checked once the engine runs
        check_judge(rewards.judge)
    if runner.kind != "local":
        return  # the command names a program inside the pod's image
    env = base_env(runner.inherit_env, prepend_python_bin=runner.prepend_python_bin)
    env.update(runner.env)
    check_command(runner.command, env, "runner.command")
    if rewards.verifier:
        venv = base_env(rewards.verifier_inherit_env)
        venv.update(rewards.verifier_env)
        check_command(rewards.verifier, venv, "rewards.verifier")


def resume_point(run_dir: Path) -> tuple[Path | None, int]:
    """The latest checkpoint of ``run_dir`` and the steps it has trained (``None, 0`` on a fresh run)."""
    ckpt = latest_checkpoint(run_dir)
    return ckpt, checkpoint_step(ckpt)


def start_training_stack(config: HarnessConfig, store: Store, run_id: str, checkpoint: Path | None,
                         done: int) -> Stack:
    """Engine, gateway and trainer with ``checkpoint`` loaded and served, its policy version recorded."""
    stack = Stack.start(config, store, run_id=run_id, train=True, checkpoint=checkpoint)
    if checkpoint is not None:
        try:
            record_policy_version(store, stack.trainer.policy_version, checkpoint, run_id=run_id, step=done)
        except BaseException:
            stack.close(failed=True)
            raise
    return stack


def baseline_from_events(run_dir: Path) -> EvalResult | None:
    """The untrained policy's evaluation recorded by an earlier (killed) invocation, if any."""
    from harnessrl.controller import EvalResult

    events = run_dir / "events.jsonl"
    if not events.is_file():
        return None
    for line in events.read_text().splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if e.get("event") == "eval" and e.get("policy_version") == 0:
            return EvalResult(0, float(e["mean_reward"]), int(e["tasks"]))
    return None


@dataclass
class TrainSummary:
    run_id: str
    steps: int
    baseline: EvalResult | None
    final: EvalResult | None
    cost: RunCost | None = None  # the run's recorded cost totals (harnessrl/run_cost.py)

    def held_out_line(self) -> str:
        if self.final is None:
            return "held-out reward: n/a (no held-out tasks)"
        if self.baseline is None:
            return (f"held-out reward: {self.final.mean_reward:.2f} ({self.final.tasks} tasks; no baseline: "
                    "set [run] eval_at_start = true)")
        return (f"held-out reward: {self.baseline.mean_reward:.2f} -> {self.final.mean_reward:.2f} "
                f"({self.final.tasks} tasks)")

    def cost_lines(self) -> list[str]:
        """What the run cost in total and per successful training attempt: printed after ``held_out_line``."""
        return cost_lines(self.cost) if self.cost is not None else []


def close_interrupted(store: Store, run_id: str) -> int:
    """Close the run's attempts still queued or running as infra failures after Ctrl-C; returns how many.

    Why a sweep: each attempt closes itself when its task is cancelled, but a task whose cancellation
    is delivered after this coroutine's own (asyncio cancels the main task first) finds the store
    closed, and its rollout stayed "running" until the next resume. By now the runner has stopped
    every harness (the controller's ``async with`` has exited), so nothing still writes to them.
    """
    closed = 0
    for status in (RolloutStatus.QUEUED, RolloutStatus.RUNNING):
        for r in store.list_rollouts(run_id=run_id, status=status, limit=100_000):
            with contextlib.suppress(Exception):  # one that closed meanwhile is fine
                store.transition_rollout(r.id, RolloutStatus.FAILED, failure_kind=FailureKind.INFRA,
                                         error=INTERRUPTED)
                closed += 1
    return closed
