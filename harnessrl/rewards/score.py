"""``score_attempt``: turn a finished attempt into rewards in the store and one final scalar.

Order of decisions (first match wins):

1. The attempt is an ``infra`` failure (never started, cancelled), or the harness stopped at a call that
   failed on the serving side (engine died, no engine, store down; ``serving.py``): no reward at all.
2. A protected file changed, the working directory is gone, or a symlink sits where a hidden file goes:
   ``tamper`` = 0 and ``final`` = 0; the verifier is not run and hidden files are never copied into a
   workspace the agent has tampered with (the copy runs unsandboxed: it must not follow the agent's links).
3. The attempt timed out and ``timed_out_reward`` is set: ``final`` = that.
4. Every enabled source is evaluated and recorded under its own name (``exit_code``, ``verifier``; the
   harness's posts are already in the store), then combined per ``combine`` into ``final``. A
   verifier failure makes the rollout ``infra`` (no ``final``) unless ``verifier_failure_reward`` is set.
   With a verifier the harness's posts take no part unless ``posted = "train"`` (``posted.py``).
5. With a judge (``[rewards.judge]``, ``judge.py``) its score is one more source, ``judge``. In group mode
   the controller scores the attempts of a group first with ``defer_judge`` (the outcome comes back
   ``pending``), then judges them together and finishes each with ``finish_judged``. A judge that gave no
   valid score makes the rollout ``infra``: the judge failed, not the agent.

Readers (trainer, dashboard) take the last reward named ``final``; the other names explain it. The
rollout should be written while still ``running`` and closed afterwards with the outcome's status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harnessrl.environments.grade import Grade
from harnessrl.redaction.text import Redactor, redactor_for
from harnessrl.rewards.config import RewardConfig
from harnessrl.rewards.container_grading import grade_attempt
from harnessrl.rewards.guards import find_tampering, symlinks_in_the_way
from harnessrl.rewards.judge import JUDGE, Judge, JudgeSetupError, Verdict
from harnessrl.rewards.posted import POSTED, SCORING_NAMES, posts_are_trained
from harnessrl.rewards.serving import serving_failure
from harnessrl.rewards.verifier import VerifierError, run_verifier
from harnessrl.runners.spec import AttemptResult, AttemptSpec
from harnessrl.runners.workspace import WorkspaceError
from harnessrl.store.base import Store
from harnessrl.types import FINAL_REWARD, FailureKind, Rollout, RolloutStatus

logger = logging.getLogger(__name__)

FINAL = FINAL_REWARD
VERIFIER = "verifier"
EXIT_CODE = "exit_code"
TAMPER = "tamper"
HARNESS = "harness"  # component name only; the harness's own posts keep the names it gave them
#: Names written by harnessrl itself; a harness posting one of these is not counted as a harness reward.
RESERVED_NAMES = SCORING_NAMES


@dataclass(frozen=True, slots=True)
class RewardOutcome:
    """The final reward of a rollout and how to close it.

    ``value`` is what was written as ``final`` (None: no reward, the rollout is excluded from training).
    ``status``/``failure_kind``/``reason`` are what the controller writes when it closes the rollout:
    the runner's, except that tampering makes it ``failed``/``agent`` and a verifier failure ``infra``.
    """

    rollout_id: str
    value: float | None
    status: RolloutStatus
    failure_kind: FailureKind | None
    reason: str | None
    components: Mapping[str, float] = field(default_factory=dict)
    tampered: tuple[str, ...] = ()
    verifier_output: str | None = None
    #: Set when the judge's score is still to come (``defer_judge``): the sources ``final`` combines.
    pending: tuple[str, ...] | None = None


def harness_reward(store: Store, rollout_id: str, names: list[str] | None) -> float | None:
    """The harness's posted reward: per name the last value, summed over names; None if it posted none."""
    last: dict[str, float] = {}
    for reward in store.get_rewards(rollout_id):  # in the order they were added
        if reward.call_index is not None or reward.name in RESERVED_NAMES:
            continue
        if names is None or reward.name in names:
            last[reward.name] = reward.value
    return sum(last.values()) if last else None


async def score_attempt(
    spec: AttemptSpec, result: AttemptResult, store: Store, config: RewardConfig, *,
    judge: Judge | None = None, defer_judge: bool = False,
) -> RewardOutcome:
    """Score one finished attempt, write its rewards, and say how to close the rollout.

    With ``[rewards.judge]`` pass the run's ``judge``; ``defer_judge`` returns a ``pending`` outcome (no
    ``final`` yet) for ``finish_judged`` once the group's attempts are judged together.
    """
    if config.judge is not None and judge is None:
        raise ValueError("[rewards.judge] is configured: score_attempt needs the run's Judge (make_judge)")
    rid = spec.rollout_id
    base = {
        "rollout_id": rid,
        "status": result.status,
        "failure_kind": result.failure_kind,
        "reason": result.reason,
    }

    async def finish(value: float | None, **changes: object) -> RewardOutcome:
        if value is not None:
            await asyncio.to_thread(store.add_reward, rid, value, FINAL)
        return RewardOutcome(**{**base, "value": value, **changes})  # type: ignore[arg-type]

    if result.failure_kind is FailureKind.INFRA:
        status = RolloutStatus.FAILED if result.status is RolloutStatus.SUCCEEDED else result.status
        return await finish(None, status=status, failure_kind=FailureKind.INFRA,
                            reason=result.reason or "attempt did not run")
    served = await asyncio.to_thread(serving_failure, store, result)
    if served is not None:
        status = RolloutStatus.TIMED_OUT if result.timed_out else RolloutStatus.FAILED
        return await finish(None, status=status, failure_kind=FailureKind.INFRA, reason=served)
    if result.box is not None or result.graded is not None:
        return await _score_graded(spec, result, store, config, finish, judge, defer_judge)
    if result.workdir is None:
        # The attempt ran elsewhere (a Kubernetes pod): there is no local workspace to check or verify.
        return await _score_remote(spec, result, store, config, finish, judge, defer_judge)

    if not result.workdir.is_dir():  # wrecking the workspace must not turn a 0 into "no reward"
        await asyncio.to_thread(store.add_reward, rid, 0.0, TAMPER)
        reason = "the harness removed its working directory"
        return await finish(
            0.0,
            status=RolloutStatus.FAILED,
            failure_kind=FailureKind.AGENT,
            reason=reason,
            components={TAMPER: 0.0},
            tampered=(f"deleted: {result.workdir}",),
        )

    if spec.protected:
        try:
            changes = await asyncio.to_thread(
                find_tampering, result.workdir, spec.protected, result.protected_sha256
            )
        except WorkspaceError as exc:
            return await finish(None, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA, reason=str(exc))
        if changes:
            reason = "tampered with protected files: " + ", ".join(changes[:20])
            logger.info("rollout %s: %s", rid, reason)
            await asyncio.to_thread(store.add_reward, rid, 0.0, TAMPER)
            return await finish(
                0.0,
                status=RolloutStatus.FAILED,
                failure_kind=FailureKind.AGENT,
                reason=reason,
                components={TAMPER: 0.0},
                tampered=tuple(changes),
            )

    if spec.assets.hidden_dir is not None and (spec.assets.verifier or config.verifier):
        links = await asyncio.to_thread(symlinks_in_the_way, spec.assets.hidden_dir, result.workdir,
                                        config.hidden_subdir)
        if links:
            reason = "left symlinks where the hidden files go: " + ", ".join(links[:20])
            logger.info("rollout %s: %s", rid, reason)
            await asyncio.to_thread(store.add_reward, rid, 0.0, TAMPER)
            return await finish(0.0, status=RolloutStatus.FAILED, failure_kind=FailureKind.AGENT, reason=reason,
                          components={TAMPER: 0.0}, tampered=tuple(f"symlink: {p}" for p in links))

    if result.timed_out and config.timed_out_reward is not None:
        return await finish(config.timed_out_reward)

    command = spec.assets.verifier or config.verifier
    components, enabled = await asyncio.to_thread(_harness_and_exit_code, spec, result, store, config,
                                                  verifier=bool(command) or config.judge is not None)
    verifier_output = None
    if command:
        enabled.append(VERIFIER)
        try:
            run = await run_verifier(command, spec, result, config)
            components[VERIFIER], verifier_output = run.value, run.output
        except VerifierError as exc:
            if config.verifier_failure_reward is None:
                logger.warning("rollout %s: %s (infra failure)", rid, exc)
                return await finish(
                    None,
                    status=RolloutStatus.FAILED,
                    failure_kind=FailureKind.INFRA,
                    reason=f"verifier failed: {exc}",
                    components=components,
                )
            components[VERIFIER] = config.verifier_failure_reward
            base["reason"] = f"verifier failed: {exc}"
        await asyncio.to_thread(store.add_reward, rid, components[VERIFIER], VERIFIER)

    if config.judge is not None:
        pending = RewardOutcome(**{**base, "value": None, "components": components,  # type: ignore[arg-type]
                                   "verifier_output": verifier_output, "pending": (*enabled, JUDGE)})
        return await _judge_now(spec, result, store, config, pending, judge, defer_judge)
    value, missing = _combine(config, enabled, components)
    if value is None:
        return await finish(
            None,
            status=RolloutStatus.FAILED,
            failure_kind=FailureKind.INFRA,
            reason=missing,
            components=components,
            verifier_output=verifier_output,
        )
    if missing and base["reason"] is None:
        base["reason"] = missing
    return await finish(value, components=components, verifier_output=verifier_output)


async def _judge_now(spec: AttemptSpec, result: AttemptResult, store: Store, config: RewardConfig,
                     pending: RewardOutcome, judge: Judge | None, defer: bool) -> RewardOutcome:
    """Return the pending outcome (``defer``), or judge this attempt alone and finish it."""
    if defer:
        return pending
    assert judge is not None
    try:
        item = await asyncio.to_thread(judge.item, spec, result, store)
    except JudgeSetupError as exc:  # no rubric for this task: the judge cannot work, the agent did nothing wrong
        return await asyncio.to_thread(finish_judged, pending, Verdict(None, None, str(exc)), store, config)
    (verdict,) = await judge.judge([item])
    return await asyncio.to_thread(finish_judged, pending, verdict, store, config)


def finish_judged(outcome: RewardOutcome, verdict: Verdict, store: Store, config: RewardConfig) -> RewardOutcome:
    """Complete a ``pending`` outcome with the judge's verdict: record ``judge`` and ``final``.

    No valid score (the judge failed after its retries): the rollout is an infra failure, no reward.
    """
    assert outcome.pending is not None, "finish_judged takes the outcome of a deferred judge"
    done = {"pending": None}
    if verdict.score is None:
        logger.warning("rollout %s: %s (infra failure of the judge)", outcome.rollout_id, verdict.error)
        status = RolloutStatus.TIMED_OUT if outcome.status is RolloutStatus.TIMED_OUT else RolloutStatus.FAILED
        return replace(outcome, status=status, failure_kind=FailureKind.INFRA, reason=f"judge failed: {verdict.error}",
                       **done)  # type: ignore[arg-type]
    components = {**outcome.components, JUDGE: verdict.score}
    store.add_reward(outcome.rollout_id, verdict.score, JUDGE)
    value, missing = _combine(config, list(outcome.pending), components)
    if value is None:
        return replace(outcome, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA, reason=missing,
                       components=components, **done)  # type: ignore[arg-type]
    store.add_reward(outcome.rollout_id, value, FINAL)
    reason = outcome.reason if outcome.reason is not None or not missing else missing
    return replace(outcome, value=value, reason=reason, components=components, **done)  # type: ignore[arg-type]


def _harness_and_exit_code(spec: AttemptSpec, result: AttemptResult, store: Store,
                           config: RewardConfig, *, verifier: bool = False) -> tuple[dict[str, float], list[str]]:
    """The reward components that need no workspace: what the harness posted, and the exit code.

    Posts that are recorded only (``posted``) show in the components but are not an enabled source, and
    a ``posted`` = 0 reward tells training to leave the harness's names and per-call rewards out.
    """
    components: dict[str, float] = {}
    enabled: list[str] = []
    if config.harness:
        trained = posts_are_trained(config.posted, verifier)
        if trained:
            enabled.append(HARNESS)
        posted = harness_reward(store, spec.rollout_id, config.harness_names)
        if posted is not None:
            components[HARNESS] = posted
        if not trained and any(r.name not in RESERVED_NAMES or r.call_index is not None
                               for r in store.get_rewards(spec.rollout_id)):
            store.add_reward(spec.rollout_id, 0.0, POSTED)
    if config.exit_code_map:
        enabled.append(EXIT_CODE)
        code = result.exit_code
        value = config.exit_code_map.get(code, config.exit_code_default) if code is not None \
            else config.exit_code_default
        components[EXIT_CODE] = value
        store.add_reward(spec.rollout_id, value, EXIT_CODE)
    return components, enabled


async def _score_remote(spec: AttemptSpec, result: AttemptResult, store: Store, config: RewardConfig,
                        finish: Any, judge: Judge | None, defer: bool) -> RewardOutcome:
    """Rewards of an attempt whose workspace is not on this machine: harness posts, exit code, and the
    judge (it reads the recorded transcript, not the workspace)."""
    if spec.assets.verifier or config.verifier:
        return await finish(None, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA,
                            reason="a verifier command runs in a local workspace, and this attempt ran remotely "
                                   "(Kubernetes): run the verifier inside the pod and post its reward to "
                                   "HARNESSRL_REWARD_URL, or use exit-code rewards")
    components, enabled = await asyncio.to_thread(_harness_and_exit_code, spec, result, store, config,
                                                  verifier=config.judge is not None)
    if config.judge is not None:
        pending = RewardOutcome(spec.rollout_id, None, result.status, result.failure_kind, result.reason,
                                components=components, pending=(*enabled, JUDGE))
        return await _judge_now(spec, result, store, config, pending, judge, defer)
    value, missing = _combine(config, enabled, components)
    if value is None:
        return await finish(None, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA, reason=missing,
                            components=components)
    return await finish(value, components=components)


async def _score_graded(spec: AttemptSpec, result: AttemptResult, store: Store, config: RewardConfig,
                        finish: Any, judge: Judge | None, defer: bool) -> RewardOutcome:
    """Rewards of an attempt graded in its task's environment: the tests run in its container (or a clean
    one; ``container_grading.py``), or a Kubernetes pod's verifier already ran them (``result.graded``).
    The grade is the ``verifier`` source; a grading failure is infra unless ``verifier_failure_reward``."""
    env = spec.assets.environment
    if result.graded is not None:
        grade = result.graded
    elif env is None:
        grade = Grade(None, "", "the attempt ran in a container but its task names no tests to grade it")
    elif result.timed_out and config.timed_out_reward is not None:
        return await finish(config.timed_out_reward)
    else:
        grade = await grade_attempt(result.box, env, timeout_s=config.verifier_timeout_s)
    components, enabled = await asyncio.to_thread(_harness_and_exit_code, spec, result, store, config,
                                                  verifier=True)
    enabled.append(VERIFIER)
    reason = result.reason
    if grade.value is None:
        if config.verifier_failure_reward is None:
            logger.warning("rollout %s: grading failed: %s (infra failure)", spec.rollout_id, grade.error)
            return await finish(None, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA,
                                reason=f"verifier failed: {grade.error}", components=components,
                                verifier_output=grade.output)
        components[VERIFIER] = config.verifier_failure_reward
        reason = f"verifier failed: {grade.error}"
    else:
        components[VERIFIER] = grade.value
    await asyncio.to_thread(store.add_reward, spec.rollout_id, components[VERIFIER], VERIFIER)
    if config.judge is not None:
        pending = RewardOutcome(spec.rollout_id, None, result.status, result.failure_kind, reason,
                                components=components, verifier_output=grade.output, pending=(*enabled, JUDGE))
        return await _judge_now(spec, result, store, config, pending, judge, defer)
    value, missing = _combine(config, enabled, components)
    if value is None:
        return await finish(None, status=RolloutStatus.FAILED, failure_kind=FailureKind.INFRA, reason=missing,
                            components=components, verifier_output=grade.output)
    return await finish(value, components=components, verifier_output=grade.output,
                        reason=reason if reason is not None else missing)


def close_rollout(store: Store, result: AttemptResult, outcome: RewardOutcome,
                  redactor: Redactor | None = None) -> Rollout:
    """Move the rollout to its terminal status, with exit code, reason and logs (harness + verifier).

    Logs and reason are redacted before they are written (``redactor``, else the gateway's default patterns
    and the run's ``[gateway] redact_patterns``, as every reader uses): a secret a harness printed must not
    sit in the database file, its backups or a ``psql`` session."""
    redact = redactor or run_redactor(store, outcome.rollout_id)
    return store.transition_rollout(
        outcome.rollout_id,
        outcome.status,
        failure_kind=outcome.failure_kind,
        error=redact(outcome.reason) if outcome.reason else outcome.reason,
        exit_code=result.exit_code,
        logs=redact(result.logs() + (outcome.verifier_output or "")),
    )


def run_redactor(store: Store, rollout_id: str) -> Redactor:
    """The redactor readers use for this rollout: default patterns plus its run's own."""
    run_id = store.get_rollout(rollout_id).run_id
    return redactor_for([store.get_run(run_id)] if run_id else [])


def _combine(
    config: RewardConfig, enabled: list[str], components: dict[str, float]
) -> tuple[float | None, str | None]:
    """(final value, note about a missing source). Value None only if ``missing_reward`` is None."""
    mode = config.combine
    if mode == "auto":
        order = [s for s in (VERIFIER, JUDGE, HARNESS, EXIT_CODE) if s in enabled]
        mode = next((s for s in order if s in components), order[0] if order else HARNESS)
    if mode == "weighted":
        absent = [s for s in config.weights if s not in components]
        if absent and config.missing_reward is None:
            return None, f"no {', '.join(absent)} reward for the weighted sum"
        total = sum(w * components.get(s, config.missing_reward or 0.0) for s, w in config.weights.items())
        note = f"no {', '.join(absent)} reward; counted as {config.missing_reward}" if absent else None
        return float(total), note
    if mode in (VERIFIER, JUDGE, HARNESS, EXIT_CODE):
        if mode in components and mode in enabled:
            return components[mode], None
        if mode == HARNESS and HARNESS in components:
            why = ' (its posts are recorded, not trained, beside a verifier: set [rewards] posted = "train")'
        else:
            why = " (the harness posted none)" if mode == HARNESS else " (source not configured)"
        note = f"no {mode} reward" + why
        return config.missing_reward, note
    values = [components.get(s, config.missing_reward) for s in enabled]
    present = [v for v in values if v is not None]
    absent = [s for s in enabled if s not in components]
    note = f"no {', '.join(absent)} reward; counted as {config.missing_reward}" if absent else None
    if not present:
        return None, "no reward source gave a value"
    reducer = {"sum": sum, "min": min, "max": max, "mean": lambda xs: sum(xs) / len(xs)}[mode]
    return float(reducer(present)), note
