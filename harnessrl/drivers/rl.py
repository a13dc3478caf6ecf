"""``harnessrl train`` and ``harnessrl collect``: open the run, start the stack, drive the controller.

The run directory is the unit of resumption: ``run.json`` names the run in the store, ``checkpoints/``
say which steps are trained, ``events.jsonl`` holds step and evaluation summaries, ``metrics.jsonl`` and
``tb/`` the trainer's metrics. Running ``harnessrl train`` again on the same directory continues. The
prologue (store, tasks, resume point, stack) is ``harnessrl/drivers/lifecycle.py``, shared with ``sft``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from harnessrl.config import HarnessConfig
from harnessrl.controller import BatchBuilder, Controller, EvalResult, StepFailed
from harnessrl.drivers.lifecycle import (
    TrainSummary,
    baseline_from_events,
    close_interrupted,
    open_run_store,
    preflight,
    register_tasks,
    resume_point,
    start_training_stack,
)
from harnessrl.engines.url_check import EngineURLError
from harnessrl.rewards.judge import JudgeSetupError
from harnessrl.run_cost import record_run_cost, success_threshold
from harnessrl.runners.preflight import CommandNotFound
from harnessrl.sft.batches import DistillBatches, RftBatches
from harnessrl.stack import Stack
from harnessrl.step_line import step_line, step_tool_use
from harnessrl.store import open_store
from harnessrl.tasks import load_tasks
from harnessrl.types import Rollout, TaskSplit

log = logging.getLogger(__name__)

#: Errors that are the user's to fix: the CLI prints their message, not a traceback.
RUN_ERRORS = (CommandNotFound, StepFailed, JudgeSetupError, EngineURLError)


def batch_builder(config: HarnessConfig) -> BatchBuilder | None:
    """The builder ``[run] mode`` asks for (``sft/batches.py``); ``None`` for RL, the controller's own. With
    ``[policies]`` distillation keeps the per-policy batches (one batch each, as before this seam existed);
    rejection sampling replaces them."""
    if config.run.mode == "rft":
        return RftBatches(success_threshold(config), config.training.samples)
    if config.run.mode == "distill" and not config.policies:
        return DistillBatches(config.distill, config.training.samples)
    return None


def _progress_counter(console: Console) -> Callable[[Rollout], None]:
    """A one-line tally of finished attempts by outcome every 10 s (logs and pipes: never redrawn)."""
    counts: Counter[str] = Counter()
    last = [0.0]

    def on_finished(rollout: Rollout) -> None:
        counts[_outcome(rollout)] += 1
        now = time.monotonic()
        if now - last[0] >= 10.0:
            last[0] = now
            console.print("  attempts finished: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                          style="dim")

    return on_finished


def _outcome(rollout: Rollout) -> str:
    return rollout.status.value if rollout.failure_kind is None else \
        f"{rollout.status.value}/{rollout.failure_kind.value}"


class _ProgressBar:
    """On a terminal: one bar over the attempts the run will launch, with the time left (ETA).

    Dynamic sampling may launch more than planned; the total grows with it.
    """

    def __init__(self, console: Console, total: int) -> None:
        self.progress = Progress(TextColumn("attempts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=True)
        self.task = self.progress.add_task("attempts", total=total)

    def __call__(self, rollout: Rollout) -> None:
        task = self.progress.tasks[0]
        self.progress.update(self.task, advance=1, total=max(task.total or 0, task.completed + 1))


@contextlib.asynccontextmanager
async def _cancelled_on_exit(pending: dict[int, asyncio.Task[Any]]) -> AsyncIterator[None]:
    """Collections started ahead of their step (step 1 beside the first evaluation, async mode's next
    steps) are stopped when the run stops early, while the controller can still cancel their attempts."""
    try:
        yield
    finally:
        for task in pending.values():
            task.cancel()
        await asyncio.gather(*pending.values(), return_exceptions=True)


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


async def train(config: HarnessConfig, console: Console | None = None) -> TrainSummary:
    # soft_wrap: a step line stays one line in a log or pipe (the terminal wraps it visually)
    console = console or Console(stderr=True, soft_wrap=True)
    if config.run.source == "production":  # off-policy, from a deployment's sessions (docs/production.md)
        from harnessrl.drivers.production import train_production

        return await train_production(config, console)  # type: ignore[return-value]  # prints held_out_line too
    run_dir = config.run_dir
    store = open_run_store(config)  # the prologue train, sft and production share (drivers/lifecycle.py)
    try:
        run_id, tasks = register_tasks(config, store, need_train_tasks=True)
        preflight(config)
        ckpt, done = resume_point(run_dir)
        t0 = time.perf_counter()
        console.print(f"[bold]harnessrl train[/] run {run_id} in {run_dir}: "
                      f"{len(tasks[TaskSplit.TRAIN])} train / {len(tasks[TaskSplit.EVAL])} held-out tasks, "
                      f"seed {config.run.seed}, {'resuming after step ' + str(done) if done else 'starting'}")
        stack = start_training_stack(config, store, run_id, ckpt, done)
        console.print(f"model ready in {time.perf_counter() - t0:.1f}s; gateway {stack.gateway_url}")
        bar: _ProgressBar | None = None
        try:
            pending: dict[int, asyncio.Task[Any]] = {}  # steps whose rollouts are being collected
            builder = batch_builder(config)  # rft or distill: their batches instead of RL's
            async with Controller(config, stack, run_id, tasks, builder) as ctl, _cancelled_on_exit(pending):
                baseline = baseline_from_events(run_dir)
                if console.is_terminal:
                    evals = int(baseline is None and done == 0 and config.run.eval_at_start) + 1 + (
                        (config.run.steps - done) // config.run.eval_every if config.run.eval_every else 0)
                    n_eval = len(tasks[TaskSplit.EVAL][: config.run.eval_tasks])
                    bar = _ProgressBar(console, (config.run.steps - done) * config.run.tasks_per_step
                                       * config.run.attempts_per_task + evals * n_eval)
                    ctl.on_finished = bar
                    bar.progress.start()
                else:
                    ctl.on_finished = _progress_counter(console)
                # async mode: the next `max_staleness` steps' rollouts run while this step trains
                ahead = config.run.max_staleness if config.run.mode == "async" else 0
                if baseline is None and done == 0 and config.run.eval_at_start and tasks[TaskSplit.EVAL]:
                    t = time.perf_counter()
                    # step 1 (and async mode's steps ahead) sample the untrained policy, as this evaluation
                    # does: they share the runner's slots, so neither waits for the other's last attempts
                    for s in range(1, min(1 + ahead, config.run.steps) + 1):
                        pending[s] = asyncio.create_task(ctl.collect_step(s))
                    baseline = await ctl.evaluate(0)
                    console.print(f"eval v0: held-out reward {_fmt(baseline.mean_reward)} "
                                  f"({baseline.tasks} tasks, {time.perf_counter() - t:.0f}s"
                                  + (", beside step 1's rollouts)" if pending else ")"))
                for step in range(done + 1, config.run.steps + 1):
                    for s in range(step, min(step + ahead, config.run.steps) + 1):
                        if s not in pending:
                            pending[s] = asyncio.create_task(ctl.collect_step(s))
                    rep = await ctl.train_step(step, pending.pop(step))
                    tools = await asyncio.to_thread(step_tool_use, store, run_id, step)
                    console.print(step_line(step, config, rep, tools))  # harnessrl/step_line.py
                    every = config.run.eval_every
                    if every and step % every == 0 and step != config.run.steps:
                        ev = await ctl.evaluate(stack.trainer.policy_version)
                        console.print(f"eval v{ev.policy_version}: held-out reward {_fmt(ev.mean_reward)}")
                final = None
                if tasks[TaskSplit.EVAL]:
                    final = await ctl.evaluate(stack.trainer.policy_version)
            # the cost totals: a `cost` event, printed after the held-out line (harnessrl/run_cost.py)
            summary = TrainSummary(run_id, config.run.steps, baseline, final, record_run_cost(run_dir))
            store.end_run(run_id)  # retention may purge its calls from now on (docs/retention.md)
            console.print(f"done in {time.perf_counter() - t0:.0f}s")
            return summary
        except BaseException as exc:  # an error or Ctrl-C: tracker runs end as failed, not finished
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
                close_interrupted(store, run_id)
            stack.close(failed=True)
            raise
        finally:
            if bar is not None:
                bar.progress.stop()
            stack.close()
    finally:
        store.close()


async def collect(config: HarnessConfig, checkpoint: Path | None, split: TaskSplit = TaskSplit.EVAL,
                  console: Console | None = None) -> EvalResult:
    """Run a split's tasks once with the given policy (no training) and return the mean reward."""
    console = console or Console(stderr=True, soft_wrap=True)
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(config.store_url)
    try:
        run_id = f"collect-{uuid.uuid4().hex[:8]}"
        store.create_run(f"collect {split.value}", config.model_dump(mode="json"), run_id=run_id)
        tasks = load_tasks(config, run_id)
        store.upsert_tasks(run_id, [lt.task for s in tasks.values() for lt in s])
        if split == TaskSplit.TRAIN:
            tasks = {TaskSplit.EVAL: tasks[TaskSplit.TRAIN], TaskSplit.TRAIN: []}
        preflight(config)
        stack = Stack.start(config, store, run_id=run_id, train=False, checkpoint=checkpoint)
        try:
            async with Controller(config, stack, run_id, tasks) as ctl:
                version = stack.trainer.policy_version if stack.trainer is not None else 0
                result = await ctl.evaluate(version)
            store.end_run(run_id)  # retention may purge its calls from now on (docs/retention.md)
            return result
        except (asyncio.CancelledError, KeyboardInterrupt):
            close_interrupted(store, run_id)
            raise
        finally:
            stack.close()
    finally:
        store.close()


def run_train(config: HarnessConfig) -> TrainSummary:
    return asyncio.run(train(config))


def run_collect(config: HarnessConfig, checkpoint: Path | None, split: TaskSplit = TaskSplit.EVAL) -> EvalResult:
    return asyncio.run(collect(config, checkpoint, split))
