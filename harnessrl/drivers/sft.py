"""``harnessrl sft CONFIG``: train the policy on recorded rollouts, then evaluate it like ``train`` does.

Same stack as RL (engine, gateway, trainer with LoRA or full weights, packing, trackers), same run
directory (``run.json``, ``checkpoints/step_N``, ``events.jsonl``, ``metrics.jsonl``), same resume: a
step is trained iff its checkpoint exists, and step N always takes the same rollouts (a seeded shuffle,
epoch after epoch), so running the command again continues where it stopped. Held-out evaluation
(``[tasks] eval``, ``[run] eval_at_start`` / ``eval_every``) runs the real harness against the policy.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from harnessrl.config import HarnessConfig
from harnessrl.controller import Controller, EvalResult
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
from harnessrl.run_cost import record_run_cost, trained_cost
from harnessrl.sft.select import Selected, select_rollouts, sft_batch
from harnessrl.store import Store, open_store
from harnessrl.types import TaskSplit


class SftError(ValueError):
    """Nothing to train on, or the query names what the store does not have."""


def step_rollouts(selected: Sequence[Selected], step: int, k: int, seed: int) -> list[Selected]:
    """The ``k`` rollouts of ``step`` (1-based): epochs of a seeded shuffle, so a resumed run picks the same."""
    chosen: list[Selected] = []
    start = (step - 1) * k
    n = len(selected)
    while len(chosen) < min(k, n):
        epoch, offset = divmod(start + len(chosen), n)
        order = list(range(n))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        chosen.append(selected[order[offset]])
    return chosen


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _event(config: HarnessConfig, kind: str, **data: Any) -> None:
    with (config.run_dir / "events.jsonl").open("a") as f:
        f.write(json.dumps({"event": kind, "time": time.time(), **data}) + "\n")


async def sft(config: HarnessConfig, console: Console | None = None) -> TrainSummary:
    console = console or Console(stderr=True, soft_wrap=True)
    run_dir = config.run_dir
    store = open_run_store(config)  # the prologue train, sft and production share (drivers/lifecycle.py)
    source: Store = open_store(config.sft.store) if config.sft.store else store
    try:
        run_id, tasks = register_tasks(config, store, need_train_tasks=False)
        try:
            selected = select_rollouts(source, config.sft, exclude_runs=[run_id])
        except ValueError as exc:
            raise SftError(str(exc)) from None
        if not selected:
            raise SftError("no recorded rollout matches [sft] (runs, split, status, min_reward, policy versions): "
                           "`harnessrl rollouts --db URL` lists what the store holds")
        if tasks[TaskSplit.EVAL]:
            preflight(config)
        ckpt, done = resume_point(run_dir)
        q = config.sft
        console.print(f"[bold]harnessrl sft[/] run {run_id} in {run_dir}: {len(selected)} rollouts selected "
                      f"({len({s.rollout.task_id for s in selected})} tasks), {q.steps} steps of "
                      f"{q.rollouts_per_step}, {'resuming after step ' + str(done) if done else 'starting'}")
        t0 = time.perf_counter()
        stack = start_training_stack(config, store, run_id, ckpt, done)
        trainer = stack.trainer
        trainer.objective = "sft"
        try:
            async with Controller(config, stack, run_id, tasks) as ctl:
                assert ctl.admin is not None
                baseline = baseline_from_events(run_dir)
                if baseline is None and done == 0 and config.run.eval_at_start and tasks[TaskSplit.EVAL]:
                    baseline = await ctl.evaluate(0)
                    console.print(f"eval v0: held-out reward {_fmt(baseline.mean_reward)} ({baseline.tasks} tasks)")
                for step in range(done + 1, q.steps + 1):
                    t = time.perf_counter()
                    chosen = step_rollouts(selected, step, q.rollouts_per_step, config.run.seed)
                    batch = await asyncio.to_thread(sft_batch, source, chosen, config.training.samples,
                                                    include_retokenized=q.include_retokenized)
                    m = await asyncio.to_thread(trainer.step, batch)
                    published = time.perf_counter()
                    version, _ = await ctl.publish_step(step)
                    # no attempts: the rollouts trained on were recorded (and paid for) by the run that sampled them
                    cost = trained_cost(m, published - t, time.perf_counter() - published) + ctl.meter.take()
                    _event(config, "sft_step", step=step, policy_version=version, rollouts=len(chosen),
                           samples=m["samples/count"], loss=m["loss"], seconds=time.perf_counter() - t,
                           cost=cost.record())
                    console.print(f"step {step}/{q.steps}: {len(chosen)} rollouts, {m['samples/count']} samples, "
                                  f"{m['tokens/trained']} trained tokens | nll {m['loss']:.4f} | "
                                  f"{time.perf_counter() - t:.0f}s")
                    every = config.run.eval_every
                    if every and step % every == 0 and step != q.steps and tasks[TaskSplit.EVAL]:
                        ev = await ctl.evaluate(trainer.policy_version)
                        console.print(f"eval v{ev.policy_version}: held-out reward {_fmt(ev.mean_reward)}")
                final: EvalResult | None = None
                if tasks[TaskSplit.EVAL]:
                    final = await ctl.evaluate(trainer.policy_version)
            summary = TrainSummary(run_id, q.steps, baseline, final, record_run_cost(run_dir))
            store.end_run(run_id)
            console.print(f"done in {time.perf_counter() - t0:.0f}s")
            return summary
        except BaseException as exc:
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
                close_interrupted(store, run_id)
            stack.close(failed=True)
            raise
        finally:
            stack.close()
    finally:
        if source is not store:
            source.close()
        store.close()


def run_sft(config: HarnessConfig) -> TrainSummary:
    return asyncio.run(sft(config))
