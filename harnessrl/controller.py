"""The training loop: pick tasks, launch `n` attempts each, gather rewards, train on whole groups, publish.

Everything the controller decides is written to the store first, so a controller killed at any point
resumes from it with ``harnessrl train`` on the same run directory:

- a step is *trained* once its checkpoint exists (``checkpoints/step_N``; policy version N = N steps);
- a step's rollouts are found by ``(run, step)``; finished ones are reused, never re-run;
- rollouts left ``queued``/``running`` by the dead controller are closed ``failed``/``infra`` and their
  attempt re-queued, so a group always has ``n`` scored attempts (infra failures are never trained).

Task choice per step is a pure function of ``(seed, step)`` so the resumed step picks the same tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import httpx

from harnessrl.config import HarnessConfig
from harnessrl.evaluation.figures import Attempt, held_out_score
from harnessrl.redaction.text import Redactor
from harnessrl.rewards import close_rollout, score_attempt
from harnessrl.rewards.judge import Judge, JudgeSetupError, Verdict, make_judge
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.rewards.score import RewardOutcome, finish_judged
from harnessrl.run_cost import Cost, ProcessMeter, attempts_cost, success_threshold, trained_cost
from harnessrl.runners import Runner, make_attempt_spec, make_runner
from harnessrl.runners.spec import AttemptResult, AttemptSpec
from harnessrl.stack import Stack
from harnessrl.store import Store, StoreError
from harnessrl.tasks import LoadedTask
from harnessrl.training.group_choice import groups_to_train, reached, varied
from harnessrl.training.replay import PastAttempt, beating, choose_replays, replay_samples
from harnessrl.types import INTERRUPTED, FailureKind, Rollout, RolloutStatus, TaskSplit
from harnessrl.weights.checkpoints import prune_checkpoints, save_checkpoint_atomic
from harnessrl.weights.versions import record_policy_version

if TYPE_CHECKING:
    from harnessrl.store.judge_calls import JudgeCallStore
    from harnessrl.training.train_batch import TrainBatch

log = logging.getLogger(__name__)


class BatchBuilder(Protocol):
    """Turns a step's rollouts into the trainer's batch (run in a worker thread) with its own loss."""

    objective: Literal["policy_gradient", "sft"]

    def __call__(self, store: Store, rollouts: Sequence[Rollout]) -> TrainBatch: ...


class StepFailed(RuntimeError):
    """No attempt of a step could be scored; the message names the most common cause."""


@dataclass
class EvalResult:
    policy_version: int
    mean_reward: float
    tasks: int
    rewards: dict[str, float] = field(default_factory=dict)


@dataclass
class StepReport:
    step: int
    rollouts: int
    failed: int
    infra: int
    reward_mean: float
    seconds: dict[str, float]
    metrics: dict[str, Any]
    cost: Cost = field(default_factory=Cost)  # what the step cost (harnessrl/run_cost.py)


class AdminClient:
    """The gateway's admin API, over HTTP (the gateway may be another process or machine)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=60.0)

    async def create_rollout(self, **body: Any) -> dict[str, Any]:
        r = await self._client.post("/admin/rollouts", json=body)
        if r.status_code != 201:
            raise StoreError(f"gateway refused to create a rollout ({r.status_code}): {r.text[:300]}")
        out: dict[str, Any] = r.json()
        return out

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self._client.post(path, json=body, timeout=None if path == "/admin/pause" else 60.0)
        if r.status_code != 200:
            raise StoreError(f"gateway admin call {path} failed ({r.status_code}): {r.text[:300]}")
        out: dict[str, Any] = r.json()
        return out

    async def pause(self, timeout_s: float = 600.0) -> dict[str, Any]:
        """New harness calls wait; returns once in-flight calls have drained (or the timeout passed)."""
        return await self._post("/admin/pause", {"timeout_s": timeout_s})

    async def resume(self) -> dict[str, Any]:
        return await self._post("/admin/resume", {})

    async def set_policy_version(self, version: int) -> dict[str, Any]:
        return await self._post("/admin/policy_version", {"version": version})

    async def closed(self, rollout_id: str) -> None:
        """Tell the gateway a rollout was closed in the store, so it refuses its calls and drops its memory."""
        await self._post(f"/admin/rollouts/{rollout_id}/closed", {})

    async def close(self) -> None:
        await self._client.aclose()


class Controller:
    def __init__(self, config: HarnessConfig, stack: Stack, run_id: str,
                 tasks: dict[TaskSplit, list[LoadedTask]], batch_builder: BatchBuilder | None = None) -> None:
        self.config = config
        self.stack = stack
        self.store = stack.store
        self.run_id = run_id
        self.tasks = tasks
        self.runner: Runner | None = None
        self.admin: AdminClient | None = None
        self.events = config.run_dir / "events.jsonl"
        #: Called with each rollout as it finishes (the CLI's progress bar).
        self.on_finished: Callable[[Rollout], None] | None = None
        #: Per step: groups launched, informative, extra (dynamic sampling) and attempts, as counts.
        self.step_stats: dict[int, Counter[str]] = {}
        self._first_reached: int | None = None  # first step with an attempt at explore_until_reward
        #: ``[rewards.judge]``: the run's judge, and (group mode) attempts scored but not yet judged.
        self.judge: Judge | None = None
        self._pending: dict[str, tuple[AttemptSpec, AttemptResult, RewardOutcome]] = {}
        #: Builds each step's batch in place of RL's (``[run] mode`` rft or distill); handed in by the run.
        self.batch_builder = batch_builder
        #: ``[training] replay_best``: each finished step's scored attempts, the pool replays come from.
        self._past_attempts: dict[int, list[PastAttempt]] = {}
        #: This process's share of each step's and evaluation's cost record (engine busy, CPU, peak RSS).
        self.meter = ProcessMeter(getattr(stack, "engine", None))

    # -- plumbing -------------------------------------------------------------------------------------
    async def __aenter__(self) -> Controller:
        self.runner = make_runner(self.config.runner, self.config.run_dir / self.config.runner.workdir_root,
                                  run_id=self.run_id, hide=self._hidden_from_attempts())
        self.admin = AdminClient(self.stack.gateway_url, self.stack.admin_token)
        judge = self.config.rewards.judge
        if judge is not None:
            try:
                # open_store's stores carry every feature store, the judges' included (store/assembly.py)
                self.judge = make_judge(judge, cast("JudgeCallStore", self.store), policy_urls=self.stack.gateway.gateway.config.engines,
                                        base_dir=self.config.base_dir,
                                        redact_patterns=self.config.gateway.redact_patterns)
                await self.judge.preflight()
            except BaseException:  # __aexit__ does not run when __aenter__ raises
                await self.__aexit__()
                raise
        return self

    def _hidden_from_attempts(self) -> list[Path]:
        """What a sandboxed attempt must not see even beside its command: run dir, store, tasks, hidden tests."""
        cfg = self.config
        paths = [cfg.run_dir, *(p for p in (cfg.resolve(cfg.tasks.train), cfg.resolve(cfg.tasks.eval)) if p)]
        if cfg.store_url.startswith("sqlite:///"):
            paths.append(Path(cfg.store_url.removeprefix("sqlite:///")))
        paths += [t.assets.hidden_dir for ts in self.tasks.values() for t in ts if t.assets.hidden_dir]
        # config files beside the harness may hold a store URL with its password, tokens, keys
        paths += [*cfg.base_dir.glob("*.toml"), *cfg.base_dir.glob(".env*")]
        return paths

    async def __aexit__(self, *exc: object) -> None:
        if self.runner is not None:
            await self.runner.aclose()
        if self.admin is not None:
            await self.admin.close()
        if self.judge is not None:
            await self.judge.aclose()

    def _event(self, kind: str, **data: Any) -> None:
        with self.events.open("a") as f:
            f.write(json.dumps({"event": kind, "time": time.time(), **data}) + "\n")

    # -- one attempt ----------------------------------------------------------------------------------
    async def attempt(self, lt: LoadedTask, *, group_id: str, step: int | None, split: TaskSplit,
                      sampling: dict[str, Any] | None, defer_judge: bool = False,
                      tags: dict[str, Any] | None = None) -> Rollout:
        """Create a rollout, run the harness, score it, close it. Never raises for harness behaviour.

        ``defer_judge`` (a group-mode judge): the rollout stays ``running`` until ``_judge_pending``.
        ``tags``: recorded in the rollout's metadata (``harnessrl eval``'s cell: checkpoint, harness)."""
        assert self.admin is not None
        metadata: dict[str, Any] = {**(tags or {}), "split": split.value}
        if sampling:
            metadata["sampling"] = sampling
        created = await self.admin.create_rollout(
            task_id=lt.task.id, input=lt.task.input, group_id=group_id, run_id=self.run_id, step=step,
            metadata=metadata)
        return await self._run_and_score(lt, created["rollout_id"], created["api_key"], attach=False,
                                         defer_judge=defer_judge)

    async def _run_and_score(self, lt: LoadedTask, rid: str, api_key: str, *, attach: bool,
                             defer_judge: bool = False) -> Rollout:
        """Run (or, ``attach``: re-attach to a still running Kubernetes Job) one attempt, score, close it."""
        assert self.runner is not None
        try:
            spec = make_attempt_spec(
                self.config.runner, rollout_id=rid, task_id=lt.task.id, task_input=lt.task.input,
                gateway_url=self.stack.gateway_url, api_key=api_key, assets=lt.assets,
                protected=tuple(self.config.rewards.protected), model=self.config.gateway.model_name)

            marked: list[asyncio.Task[Rollout]] = []

            def on_start(handle: str) -> None:  # called by the runner on the loop: the write goes to a thread
                marked.append(asyncio.create_task(asyncio.to_thread(
                    self.store.transition_rollout, rid, RolloutStatus.RUNNING, runner_handle=handle)))

            try:
                result = await self.runner.run(spec, on_start=None if attach else on_start)
            finally:
                await asyncio.gather(*marked, return_exceptions=True)  # running before anything closes it
            for task in marked:
                task.result()  # a failed write is this attempt's infra failure (below)
            outcome = await score_attempt(spec, result, self.store, self.config.rewards, judge=self.judge,
                                          defer_judge=defer_judge and self._group_judge)
            if outcome.pending is not None:  # judged with its group, then closed (_judge_pending)
                self._pending[rid] = (spec, result, outcome)
                await self.runner.release(result)
                return await asyncio.to_thread(self.store.get_rollout, rid)
            rollout = await asyncio.to_thread(close_rollout, self.store, result, outcome)
            await self.runner.release(result)
        except asyncio.CancelledError:  # Ctrl-C or shutdown: the runner stopped the harness; say so now
            with contextlib.suppress(Exception):  # not "running" until the next resume finds it
                await asyncio.to_thread(self._fail_infra, rid, INTERRUPTED)
            raise
        except Exception as exc:  # a bug or infra problem: never let one attempt sink the step
            log.exception("attempt %s failed in the controller", rid)
            rollout = await asyncio.to_thread(self._fail_infra, rid, f"controller error: {type(exc).__name__}: {exc}")
        await self._tell_closed(rollout)
        if self.on_finished is not None:
            self.on_finished(rollout)
        return rollout

    async def _tell_closed(self, rollout: Rollout) -> None:
        """The gateway learns of a rollout closed in the store here; without it the rollout's render history
        stayed in the gateway for the rest of the run. Memory only: a failure is logged, never the attempt's."""
        if self.admin is None or not rollout.status.terminal:
            return
        try:
            await self.admin.closed(rollout.id)
        except (httpx.HTTPError, StoreError) as exc:
            log.warning("could not tell the gateway that rollout %s closed (%s); it keeps its history until "
                        "evicted", rollout.id, exc)

    @property
    def _group_judge(self) -> bool:
        return self.judge is not None and self.judge.config.mode == "group"

    async def _judge_pending(self, rollouts: list[Rollout]) -> list[Rollout]:
        """Group mode: judge a group's scored attempts in one call, finish and close them; returns the
        group without those the judge could not score (infra failures of the judge, not re-run: running the
        harness again does not mend a judge)."""
        pending = [self._pending.pop(r.id) for r in rollouts if r.id in self._pending]
        if not pending:
            return rollouts
        assert self.judge is not None
        try:
            items = [await asyncio.to_thread(self.judge.item, spec, result, self.store) for spec, result, _ in pending]
            verdicts = await self.judge.judge(items)
        except asyncio.CancelledError:
            for spec, _, _ in pending:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self._fail_infra, spec.rollout_id,
                                            "controller interrupted while the judge scored this attempt")
            raise
        except Exception as exc:  # a bug or a setup problem (no rubric): the judge failed, not the agents
            if not isinstance(exc, JudgeSetupError):
                log.exception("judging group %s failed in the controller", rollouts[0].group_id)
            verdicts = [Verdict(None, None, f"{type(exc).__name__}: {exc}") for _ in pending]
        closed: dict[str, Rollout] = {}
        for (spec, result, outcome), verdict in zip(pending, verdicts, strict=True):
            try:
                final = await asyncio.to_thread(finish_judged, outcome, verdict, self.store, self.config.rewards)
                closed[spec.rollout_id] = await asyncio.to_thread(close_rollout, self.store, result, final)
            except Exception as exc:
                log.exception("closing judged attempt %s failed", spec.rollout_id)
                closed[spec.rollout_id] = await asyncio.to_thread(self._fail_infra, spec.rollout_id,
                                                                  f"controller error: {exc}")
            await self._tell_closed(closed[spec.rollout_id])
            if self.on_finished is not None:
                self.on_finished(closed[spec.rollout_id])
        out = [closed.get(r.id, r) for r in rollouts]
        dropped = [r for r in out if r.failure_kind == FailureKind.INFRA]
        if dropped:
            log.warning("group %s: the judge could not score %d attempts (%s)", rollouts[0].group_id, len(dropped),
                        dropped[-1].error)
        return [r for r in out if r.failure_kind != FailureKind.INFRA]

    def _fail_infra(self, rid: str, reason: str) -> Rollout:
        rollout = self.store.get_rollout(rid)
        if rollout.status.terminal:
            return rollout
        return self.store.transition_rollout(rid, RolloutStatus.FAILED, failure_kind=FailureKind.INFRA,
                                             error=reason)

    # -- a step's rollouts ----------------------------------------------------------------------------
    def step_tasks(self, step: int) -> list[LoadedTask]:
        """The train tasks of ``step`` (1-based): epochs of a seeded shuffle, so resume picks the same."""
        pool = self.tasks[TaskSplit.TRAIN]
        k = self.config.run.tasks_per_step
        start = (step - 1) * k
        chosen: list[LoadedTask] = []
        while len(chosen) < k:
            epoch, offset = divmod(start + len(chosen), len(pool))
            order = list(range(len(pool)))
            random.Random(self.config.run.seed * 1_000_003 + epoch).shuffle(order)
            chosen.append(pool[order[offset]])
        return chosen

    async def collect_step(self, step: int) -> list[Rollout]:
        """Run (or finish, after a restart) the attempts of ``step``; returns its scored rollouts."""
        run = self.config.run
        existing = [r for r in await asyncio.to_thread(self._rollouts_of, step)
                    if r.metadata.get("split") == TaskSplit.TRAIN.value]
        # Left behind by a controller that died. A local harness died with it; a Kubernetes Job may still
        # be running, and is re-attached to instead of launched again.
        live = await self._live_attempts()
        attachable = {r.id for r in existing if not r.status.terminal and r.id in live}
        for r in existing:
            if not r.status.terminal and r.id not in attachable:
                await asyncio.to_thread(self._fail_infra, r.id, "controller restarted while this attempt was in flight")
        sampling = {"temperature": run.train_temperature} if run.train_temperature is not None else None

        reruns = Counter[str]()  # attempts launched again after infra failures: count/infra.reruns

        async def group(lt: LoadedTask) -> list[Rollout]:
            gid = f"{self.run_id}:step{step}:{lt.task.id}"
            ended = [r.id for r in existing if r.group_id == gid and r.id not in attachable]
            done = await asyncio.to_thread(lambda: [self.store.get_rollout(rid) for rid in ended])
            done += await asyncio.gather(*(self._run_and_score(lt, r.id, "(re-attached)", attach=True,
                                                               defer_judge=True)
                                           for r in existing if r.group_id == gid and r.id in attachable))
            good = [r for r in done if r.failure_kind != FailureKind.INFRA and r.status != RolloutStatus.CANCELLED]
            retries, launched = len(done) - len(good), 0
            while len(good) < run.attempts_per_task:
                need = run.attempts_per_task - len(good)
                launched += need
                new = await asyncio.gather(*(self.attempt(lt, group_id=gid, step=step, split=TaskSplit.TRAIN,
                                                          sampling=sampling, defer_judge=True) for _ in range(need)))
                good += [r for r in new if r.failure_kind != FailureKind.INFRA]
                retries += sum(r.failure_kind == FailureKind.INFRA for r in new)
                if len(good) < run.attempts_per_task and retries > run.max_retries * run.attempts_per_task:
                    failed = [r for r in new if r.failure_kind == FailureKind.INFRA]
                    log.warning("group %s: %d infra failures, giving up on it this step (last: %s)", gid,
                                retries, failed[-1].error if failed else "?")
                    break
            reruns["infra.reruns"] += max(0, len(done) + launched - run.attempts_per_task)
            return await self._judge_pending(good)

        base = self.step_tasks(step)
        groups = list(await asyncio.gather(*(group(lt) for lt in base)))
        stats: Counter[str] = Counter({"dynamic.groups": len(base)})
        if run.dynamic_sampling or run.explore_until_reward is not None:
            groups += await self._sample_more(step, base, groups, group, stats)
        rewards = await asyncio.to_thread(self._group_rewards, groups)
        stats["dynamic.informative_groups"] = sum(map(varied, rewards))
        stats["dynamic.attempts"] = sum(len(g) for g in groups)
        if run.explore_until_reward is not None:
            stats["explore.reached"] = int(reached(rewards, run.explore_until_reward))
            kept = groups_to_train(rewards, run.tasks_per_step)
            stats["explore.untrained_groups"] = len(groups) - len(kept)
            groups = [groups[i] for i in kept]
        stats["infra.reruns"] = reruns["infra.reruns"]  # bounded per group by [run] max_retries
        self.step_stats[step] = stats
        return [r for g in groups for r in g]

    async def _sample_more(self, step: int, base: list[LoadedTask], groups: list[list[Rollout]],
                           group: Callable[[LoadedTask], Any], stats: Counter[str]) -> list[list[Rollout]]:
        """Groups of extra tasks until the step has what it lacks, within ``max_attempts_per_step``.

        Dynamic sampling: until ``tasks_per_step`` groups have varied rewards. A group whose attempts all
        scored the same has zero advantage everywhere, so a step made of them trains on nothing (and a policy
        that collapsed onto one answer would stay there); each wave launches what is still missing, scaled up
        by the share of groups that turned out informative so far. ``explore_until_reward``: until an attempt
        reaches that reward, a step's worth of groups per wave. Extra tasks come in a seeded order per step,
        so a resumed step launches (and finds) the same groups.
        """
        run = self.config.run
        budget = run.max_attempts_per_step or 3 * run.tasks_per_step * run.attempts_per_task
        used = {lt.task.id for lt in base}
        pool = [lt for lt in self.tasks[TaskSplit.TRAIN] if lt.task.id not in used]
        random.Random(f"{run.seed}:extra:{step}").shuffle(pool)
        extra: list[list[Rollout]] = []
        launched = len(base) * run.attempts_per_task
        while pool:
            done = await asyncio.to_thread(self._group_rewards, groups + extra)
            size = 0
            if run.dynamic_sampling:
                informative = sum(map(varied, done))
                need = run.tasks_per_step - informative
                share = max(informative / len(done), 1 / 3) if done else 1.0
                size = math.ceil(need / share) if need > 0 else 0
            target = run.explore_until_reward
            if target is not None and not reached(done, target) and \
                    not await asyncio.to_thread(self._reached_before, step, target):
                size = max(size, len(base))
            room = (budget - launched) // run.attempts_per_task
            if size <= 0 or room <= 0:
                break
            wave, pool = pool[: min(room, size)], pool[min(room, size):]
            launched += len(wave) * run.attempts_per_task
            stats["dynamic.extra_groups"] += len(wave)
            stats["dynamic.waves"] += 1
            extra += await asyncio.gather(*(group(lt) for lt in wave))
        return extra

    def rewards_of(self, rollouts: Sequence[Rollout]) -> dict[str, float | None]:
        """Each rollout's outcome reward (the rule of ``harnessrl.rewards.outcome``), read from the store."""
        return {r.id: rollout_reward(self.store.get_rewards(r.id)) for r in rollouts}

    def _group_rewards(self, groups: list[list[Rollout]]) -> list[list[float]]:
        """Each group's scored rewards (unscored attempts left out), read from the store once."""
        return [[v for v in self.rewards_of(g).values() if v is not None] for g in groups]

    def _holding(self, step: int) -> bool:
        """``[run] explore_hold``: whether ``step`` trains nothing, because no attempt of the run, this step's
        included, has reached ``explore_until_reward`` yet."""
        run = self.config.run
        if not run.explore_hold or run.explore_until_reward is None:
            return False
        if self.step_stats.get(step, Counter()).get("explore.reached"):
            return False
        return not self._reached_before(step, run.explore_until_reward)

    def _reached_before(self, step: int, target: float) -> bool:
        """Whether a training attempt of an earlier step reached ``target``: exploration is for finding the
        first one (success replay, ``[training] replay_best``, keeps training it until the policy samples
        its own), so later steps stay normal steps."""
        if self._first_reached is not None and self._first_reached < step:
            return True
        self._first_reached = None
        for s in range(1, step):
            train = [r for r in self._rollouts_of(s) if r.metadata.get("split") == TaskSplit.TRAIN.value]
            if reached(self._group_rewards([train]), target):
                self._first_reached = s
                return True
        return False

    async def _live_attempts(self) -> set[str]:
        """Rollout ids whose attempt still runs somewhere this runner can re-attach to (Kubernetes)."""
        existing = getattr(self.runner, "existing", None)
        return set(await existing()) if existing is not None else set()

    def _rollouts_of(self, step: int) -> list[Rollout]:
        return list(self.store.iter_rollouts(run_id=self.run_id, step=step))

    # -- evaluation -----------------------------------------------------------------------------------
    async def evaluate(self, policy_version: int) -> EvalResult:
        """Run every held-out task once (no training on them); mean of their final rewards."""
        tasks = self.tasks[TaskSplit.EVAL][: self.config.run.eval_tasks]
        if not tasks:
            return EvalResult(policy_version, float("nan"), 0)
        temp = self.config.run.eval_temperature
        sampling = {"temperature": temp} if temp is not None else None
        rollouts = await asyncio.gather(*(
            self.attempt(lt, group_id=f"{self.run_id}:eval:v{policy_version}:{lt.task.id}", step=None,
                         split=TaskSplit.EVAL, sampling=sampling) for lt in tasks))
        outcome = await asyncio.to_thread(self.rewards_of, rollouts)
        # one definition of a held-out score, harnessrl eval's (evaluation/figures.py): infra is not a 0
        mean, scored = held_out_score([Attempt(r, outcome[r.id]) for r in rollouts])
        rewards = [r for r in rollouts if r.failure_kind != FailureKind.INFRA]
        result = EvalResult(policy_version, mean, len(scored), scored)
        cost = await asyncio.to_thread(attempts_cost, self.store, rollouts, success_threshold(self.config))
        self._event("eval", policy_version=policy_version, mean_reward=mean, tasks=len(scored),
                    infra_failures=len(tasks) - len(rewards), cost=(cost + self.meter.take()).record())
        writer = getattr(self.stack.trainer, "metrics", None)
        if writer is not None:  # the held-out curve beside the training metrics (JSONL and TensorBoard)
            writer.write(policy_version, {"eval/reward_mean": mean, "eval/tasks": len(scored)})
        return result

    # -- training -------------------------------------------------------------------------------------
    async def publish_step(self, step: int) -> tuple[int, Path]:
        """Serve the trainer's weights as the next policy version, then checkpoint ``step`` and record both.

        Harness calls arriving during the swap wait in the gateway (no 429 to survive), in-flight ones
        finish on the old weights; every call after resume is stamped with the new version. With
        ``[engine] on_update = "continue"`` (embedded) or ``"keep"`` (vLLM LoRA) nothing waits for the calls
        in flight: the embedded engine swaps between two decode steps and reports each token's version; on
        vLLM they finish on the old adapter while new calls go to the new one.
        """
        assert self.admin is not None
        trainer = self.stack.trainer
        drain = self.config.engine.on_update == "drain"
        if drain:
            await self.admin.pause()
        try:
            version = await asyncio.to_thread(trainer.publish)
            await self.admin.set_policy_version(version)
        finally:
            if drain:
                await self.admin.resume()
        ckpt = await asyncio.to_thread(save_checkpoint_atomic, trainer, self.config.run_dir, step)
        await asyncio.to_thread(record_policy_version, self.store, version, ckpt, run_id=self.run_id, step=step)
        keep = self.config.run.keep_checkpoints
        if keep is not None:  # after the new checkpoint is durable and recorded: the newest always survives
            await asyncio.to_thread(self._prune, keep)
        return version, ckpt

    def _prune(self, keep: int) -> None:
        from harnessrl.weights.publish import prune_published  # imports torch; the controller does not

        run_dir = Path(self.config.run_dir)
        gone = prune_checkpoints(run_dir, keep) + prune_published(run_dir / "policies", keep)
        if gone:
            log.info("deleted %d old checkpoint and policy folders ([run] keep_checkpoints = %d)", len(gone), keep)

    async def train_step(self, step: int, collected: asyncio.Task[list[Rollout]] | None = None) -> StepReport:
        """Train on ``step``'s rollouts (collected now, or by ``collected`` started earlier in async mode)."""
        from harnessrl.training.train_batch import batch_from_store

        assert self.admin is not None
        trainer = self.stack.trainer
        t0 = time.perf_counter()
        rollouts = await (collected if collected is not None else self.collect_step(step))
        if not rollouts:
            await asyncio.to_thread(self._raise_if_all_infra, step)
        rollouts, stale = self._drop_stale(rollouts, trainer.policy_version)
        t1 = time.perf_counter()
        if self.batch_builder is not None:  # the run's mode: rft or distill (harnessrl/sft/batches.py, picked by drivers/rl.py)
            if self.batch_builder.objective != "policy_gradient":
                trainer.objective = self.batch_builder.objective
            batch = await asyncio.to_thread(self.batch_builder, self.store, rollouts)
        elif getattr(trainer, "builds_batches", False):  # several policies: one batch each (policies/)
            batch = await asyncio.to_thread(trainer.batch_from_store, self.store, rollouts)
        else:
            batch = await asyncio.to_thread(batch_from_store, self.store, rollouts, self.config.training)
            if self.config.training.replay_best:
                await asyncio.to_thread(self._add_replays, step, batch)
                self._past_attempts[step] = [PastAttempt(rid, step, v) for rid, v in batch.rewards.items()]
        batch.counts["rollouts_stale_dropped"] += stale
        if await asyncio.to_thread(self._holding, step):  # [run] explore_hold: nothing to train toward yet
            batch.counts["explore.held"] += 1
            batch.counts["explore.held_samples"] += len(batch.samples)
            batch.counts["explore.held_groups"] += batch.counts["groups.trained"]
            batch.counts["groups.trained"] = batch.counts["rollouts.trained"] = 0  # chosen, then held back
            batch.samples = []
        batch.counts.update(self.step_stats.pop(step, Counter()))
        if self.stack.engine is not None and self.config.run.mode != "async":  # idle now: its caches go stale
            await asyncio.to_thread(self.stack.engine.release_memory)  # so the step's peak is not theirs + ours
        metrics = await asyncio.to_thread(trainer.step, batch)
        t2 = time.perf_counter()
        version, _ = await self.publish_step(step)
        t3 = time.perf_counter()
        rewards = [v for v in (await asyncio.to_thread(self.rewards_of, rollouts)).values() if v is not None]
        all_rollouts = await asyncio.to_thread(self._rollouts_of, step)
        cost = await asyncio.to_thread(attempts_cost, self.store, all_rollouts, success_threshold(self.config))
        cost += trained_cost(metrics, t2 - t1, t3 - t2) + self.meter.take()
        report = StepReport(
            step=step, rollouts=len(rollouts),
            failed=sum(r.status != RolloutStatus.SUCCEEDED for r in rollouts),
            infra=sum(r.failure_kind == FailureKind.INFRA for r in all_rollouts),
            reward_mean=statistics.fmean(rewards) if rewards else float("nan"),
            seconds={"rollouts": t1 - t0, "train": t2 - t1, "publish": t3 - t2}, metrics=metrics, cost=cost)
        self._event("step", step=step, policy_version=version, rollouts=report.rollouts,
                    failed=report.failed, infra=report.infra, reward_mean=report.reward_mean,
                    stale_dropped=stale, seconds=report.seconds,
                    cost={**cost.record(), "success_at": success_threshold(self.config)})
        return report

    def _add_replays(self, step: int, batch: TrainBatch) -> None:
        """Success replay (``[training] replay_best``, ``training/replay.py``): the best attempts of earlier
        steps that beat everything this step scored join its batch."""
        cfg = self.config.training
        rewards = list(batch.rewards.values())
        candidates = beating([p for s in range(1, step) for p in self._scored_attempts(s)], rewards)
        chosen = choose_replays(candidates, rewards, cfg.replay_best, cfg.estimator)
        batch.counts["replay.candidates"] += len(candidates)
        batch.counts["replay.rollouts"] += 0  # reported every step, 0 included
        for attempt, advantage in chosen:
            rollout = self.store.get_rollout(attempt.rollout_id)
            samples = replay_samples(self.store.get_calls(rollout.id), attempt, rollout.group_id, advantage,
                                     cfg.samples)
            batch.samples.extend(samples)
            batch.advantages[f"replay:{rollout.id}"] = advantage
            batch.counts["replay.rollouts"] += bool(samples)

    def _scored_attempts(self, step: int) -> list[PastAttempt]:
        """An earlier step's scored training attempts with their training reward, as its batch had them (read
        back from the store once after a resume; a finished step does not change)."""
        from harnessrl.training.train_batch import batch_from_store

        if step not in self._past_attempts:
            rewards = batch_from_store(self.store, self._rollouts_of(step), self.config.training).rewards
            self._past_attempts[step] = [PastAttempt(rid, step, value) for rid, value in rewards.items()]
        return self._past_attempts[step]

    def _raise_if_all_infra(self, step: int) -> None:
        """A step whose every attempt failed before it could be scored has a cause outside the policy
        (harness, verifier, cluster): stop before training on nothing, with that cause."""
        infra = [r for r in self._rollouts_of(step) if r.failure_kind == FailureKind.INFRA]
        if not infra:
            return
        reason, n = Counter(r.error or "no reason recorded" for r in infra).most_common(1)[0]
        reason = Redactor(self.config.gateway.redact_patterns)(reason)  # printed and kept in events.jsonl
        self._event("step_failed", step=step, infra=len(infra), reason=reason)
        raise StepFailed(
            f"step {step}: all {len(infra)} attempts failed before they could be scored (infra), "
            f"{n} of them with: {reason}\nNothing was trained. Fix the cause and run the same command "
            f"again: the run resumes at step {step}.")

    def _drop_stale(self, rollouts: list[Rollout], trainer_version: int) -> tuple[list[Rollout], int]:
        """Async mode: whole groups launched more than ``max_staleness`` versions ago are not trained."""
        if self.config.run.mode != "async":
            return rollouts, 0
        limit = self.config.run.max_staleness
        stale_groups = {r.group_id for r in rollouts if trainer_version - r.policy_version > limit}
        kept = [r for r in rollouts if r.group_id not in stale_groups]
        return kept, len(rollouts) - len(kept)
