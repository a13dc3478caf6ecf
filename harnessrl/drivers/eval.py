"""``harnessrl eval``: every checkpoint in every harness, k attempts per task, recorded like any rollout.

One stack (engine and gateway) per checkpoint, one controller per harness on it, all harnesses' attempts at
once. The eval's directory is the unit of resumption (``evaluation/plan.py``): each pass asks the store what
each task of each cell still needs, so a rerun, or the next round after infra failures, runs only that.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from harnessrl.config import HarnessConfig
from harnessrl.controller import Controller
from harnessrl.drivers.lifecycle import close_interrupted, open_run_store, preflight
from harnessrl.evaluation.figures import Attempt
from harnessrl.evaluation.plan import Checkpoint, fingerprint, open_manifest, resolve_checkpoint, still_needed
from harnessrl.evaluation.results import TAG, EvalFigures, eval_figures, recorded_attempts
from harnessrl.run_cost import success_threshold
from harnessrl.stack import Stack
from harnessrl.store import NotFound, Store
from harnessrl.tasks import LoadedTask, load_tasks
from harnessrl.types import TaskSplit


@dataclass
class EvalSummary:
    """What ``harnessrl eval`` prints and writes."""

    run_id: str
    eval_dir: Path
    figures: EvalFigures
    launched: int  # attempts this command ran (0: everything was already there)
    temperature: float | None


@dataclass(frozen=True)
class EvalPlan:
    """The matrix as resolved from the config and the command line."""

    checkpoints: list[Checkpoint]
    harnesses: dict[str, HarnessConfig]  # the config with that harness's runner
    tasks: list[LoadedTask]
    attempts: int
    k: int
    temperature: float | None


def plan_eval(config: HarnessConfig, checkpoints: list[str] | None = None,
              harnesses: list[str] | None = None) -> EvalPlan:
    """Resolve checkpoints (``--checkpoint`` paths from the working directory, the config's from its folder),
    harnesses and the task set; a name or path that does not exist is refused here, before a model loads."""
    ev = config.eval
    specs = [(s, Path.cwd()) for s in checkpoints] if checkpoints else [(s, config.base_dir) for s in ev.checkpoints]
    resolved = [resolve_checkpoint(s, base) for s, base in specs]
    labels = [c.label for c in resolved]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two checkpoints share a name in the figures ({', '.join(labels)}): give each once")
    runners = config.harness_runners()
    names = harnesses or ev.harnesses or list(runners)
    unknown = [n for n in names if n not in runners]
    if unknown:
        raise ValueError(f"harness {', '.join(map(repr, unknown))} is not defined (the config has "
                         f"{', '.join(runners)}): add a [harnesses.<name>] section")
    k = ev.k or ev.attempts
    if k > ev.attempts:
        raise ValueError(f"[eval] k = {k} needs at least as many attempts per task ([eval] attempts = {ev.attempts})")
    temperature = ev.temperature if ev.temperature is not None else config.run.eval_temperature
    return EvalPlan(resolved, {n: config.model_copy(update={"runner": runners[n]}) for n in dict.fromkeys(names)},
                    [], ev.attempts, k, temperature)


def _load_tasks(config: HarnessConfig, run_id: str) -> list[LoadedTask]:
    tasks = load_tasks(config, run_id)[TaskSplit(config.eval.split)][: config.eval.tasks]
    if not tasks:
        raise ValueError(f"no {config.eval.split} tasks to evaluate: set [tasks] {config.eval.split} = "
                         "\"tasks.jsonl\" (or Harbor folders, SWE-bench records)")
    return tasks


def _fingerprint(config: HarnessConfig, plan: EvalPlan) -> dict[str, Any]:
    return fingerprint(
        tasks={lt.task.id: {"input": lt.task.input, "reference": dict(lt.assets.verifier_input or {})}
               for lt in plan.tasks},
        checkpoints=plan.checkpoints,
        harnesses={n: c.runner.model_dump(mode="json") for n, c in plan.harnesses.items()},
        settings={"attempts": plan.attempts, "temperature": plan.temperature, "split": config.eval.split,
                  "engine": config.engine.model_dump(mode="json", exclude={"seed"}),
                  "rewards": config.rewards.model_dump(mode="json"), "success_at": success_threshold(config)})


def _needed(plan: EvalPlan, checkpoint: str, done: dict[tuple[str, str, str], list[Attempt]],
            infra_retries: int) -> dict[str, list[LoadedTask]]:
    """Per harness, one entry per attempt to launch now for ``checkpoint``."""
    out: dict[str, list[LoadedTask]] = {}
    for harness in plan.harnesses:
        launch = [lt for lt in plan.tasks for _ in range(
            still_needed(done.get((checkpoint, harness, lt.task.id), []), wanted=plan.attempts,
                         infra_retries=infra_retries))]
        if launch:
            out[harness] = launch
    return out


async def run_eval(config: HarnessConfig, checkpoints: list[str] | None = None, harnesses: list[str] | None = None,
                   console: Console | None = None) -> EvalSummary:
    console = console or Console(stderr=True, soft_wrap=True)
    plan = plan_eval(config, checkpoints, harnesses)
    for hc in plan.harnesses.values():
        preflight(hc)  # every harness starts, before a model loads
    store = open_run_store(config)
    fresh = f"eval-{uuid.uuid4().hex[:8]}"
    run_id = fresh
    try:
        plan = dataclasses.replace(plan, tasks=_load_tasks(config, fresh))
        run_id = open_manifest(config.run_dir, _fingerprint(config, plan), fresh)
        if run_id != fresh:
            plan = dataclasses.replace(plan, tasks=[dataclasses.replace(
                lt, task=dataclasses.replace(lt.task, run_id=run_id)) for lt in plan.tasks])
        try:
            store.get_run(run_id)
            store.end_run(run_id, ended=False)
        except NotFound:
            store.create_run(f"eval {config.run.name}", config.model_dump(mode="json"), run_id=run_id)
        store.upsert_tasks(run_id, [lt.task for lt in plan.tasks])
        stale = close_interrupted(store, run_id)  # a killed eval's attempts: infra, rerun below
        if stale:
            console.print(f"{stale} attempt(s) of an interrupted eval closed as infra; they are run again")
        launched = 0
        sampling = {"temperature": plan.temperature} if plan.temperature is not None else None
        for ck in plan.checkpoints:
            needed = _needed(plan, ck.label, recorded_attempts(store, run_id), config.eval.infra_retries)
            if not needed:
                continue
            t0 = time.perf_counter()
            stack = Stack.start(config, store, run_id=run_id, train=False, checkpoint=ck.path)
            try:
                launched += await _run_checkpoint(plan, ck, stack, run_id, store, sampling,
                                                  config.eval.infra_retries, console)
            finally:
                stack.close()
            console.print(f"{ck.label}: done in {time.perf_counter() - t0:.0f}s")
        store.end_run(run_id)
        figures = eval_figures(store, run_id, task_ids=[t.task.id for t in plan.tasks], k=plan.k,
                               attempts=plan.attempts, success_at=success_threshold(config),
                               checkpoints=[c.label for c in plan.checkpoints], harnesses=list(plan.harnesses),
                               resamples=config.eval.resamples, level=config.eval.level)
        return EvalSummary(run_id, config.run_dir, figures, launched, plan.temperature)
    except (asyncio.CancelledError, KeyboardInterrupt):
        close_interrupted(store, run_id)
        raise
    finally:
        store.close()


async def _run_checkpoint(plan: EvalPlan, ck: Checkpoint, stack: Stack, run_id: str, store: Store,
                          sampling: dict[str, Any] | None, infra_retries: int, console: Console) -> int:
    """Every harness's missing attempts on this checkpoint's stack, in rounds until none is missing (an
    infra failure is replaced in the next round, up to the retry bound)."""
    launched = 0
    tasks = {TaskSplit.EVAL: plan.tasks, TaskSplit.TRAIN: []}
    controllers = {h: Controller(hc, stack, run_id, tasks) for h, hc in plan.harnesses.items()}
    for ctl in controllers.values():
        await ctl.__aenter__()
    try:
        while needed := _needed(plan, ck.label, await asyncio.to_thread(recorded_attempts, store, run_id), infra_retries):
            todo = [(h, lt) for h, lts in needed.items() for lt in lts]
            console.print(f"{ck.label}: running {len(todo)} attempt(s) in "
                          + ", ".join(f"{h} ({len(lts)})" for h, lts in needed.items()))
            await asyncio.gather(*(controllers[h].attempt(
                lt, group_id=f"{run_id}:{ck.label}:{h}:{lt.task.id}", step=None, split=TaskSplit.EVAL,
                sampling=sampling, tags={TAG: {"checkpoint": ck.label, "harness": h}}) for h, lt in todo))
            launched += len(todo)
    finally:
        for ctl in controllers.values():
            await ctl.__aexit__()
    return launched


def evaluate(config: HarnessConfig, checkpoints: list[str] | None = None,
             harnesses: list[str] | None = None) -> EvalSummary:
    return asyncio.run(run_eval(config, checkpoints, harnesses))
