"""One cell's figures (a checkpoint in a harness on a task set) from its attempts, and paired comparisons.

The one definition of a held-out score, used by ``harnessrl eval`` and by ``train``'s evaluations alike: an
attempt that ended as infra (the harness or machine failed, not the task) or has no reward is not scored; a
task's score is the mean over its scored attempts; a figure is the mean over the tasks with at least one
scored attempt. A task with none is *unscored*, listed, never counted as 0.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harnessrl.evaluation.estimators import Interval, bootstrap, paired_difference, pass_at_k
from harnessrl.types import INTERRUPTED, FailureKind, Rollout


@dataclass(frozen=True)
class Attempt:
    """One finished attempt as an eval reads it: the rollout and its outcome reward (None: none recorded)."""

    rollout: Rollout
    reward: float | None

    @property
    def infra(self) -> bool:
        return self.rollout.failure_kind == FailureKind.INFRA or not self.rollout.status.terminal

    @property
    def interrupted(self) -> bool:
        """Stopped because the eval itself stopped (Ctrl-C, a kill): rerun, not held against the task."""
        return self.rollout.failure_kind == FailureKind.INFRA and self.rollout.error == INTERRUPTED

    @property
    def scored(self) -> bool:
        return not self.infra and self.reward is not None

    @property
    def seconds(self) -> float | None:
        r = self.rollout
        return None if r.started_at is None or r.finished_at is None else r.finished_at - r.started_at


@dataclass(frozen=True)
class TaskResult:
    """One task's attempts in one cell."""

    task_id: str
    attempts: tuple[Attempt, ...]
    success_at: float

    @property
    def rewards(self) -> list[float]:
        return [a.reward for a in self.attempts if a.scored and a.reward is not None]

    @property
    def n(self) -> int:
        return len(self.rewards)

    @property
    def c(self) -> int:
        return sum(r >= self.success_at for r in self.rewards)

    @property
    def infra(self) -> int:
        return sum(a.infra for a in self.attempts)

    def pass_at(self, k: int) -> float | None:
        """pass@k of this task; None when it has fewer than k scored attempts (not estimable)."""
        return pass_at_k(self.n, self.c, k) if self.n >= k else None


@dataclass(frozen=True)
class CellFigures:
    """pass@1, pass@k and mean reward over tasks, each with its bootstrap interval, and what it cost."""

    checkpoint: str
    harness: str
    k: int
    tasks: dict[str, TaskResult]
    pass1: Interval
    passk: Interval
    passk_tasks: int  # tasks with at least k scored attempts: those pass@k is over
    reward: Interval
    attempts: int
    infra: list[Attempt] = field(default_factory=list)
    seconds_per_attempt: float = math.nan
    calls_per_attempt: float = math.nan  # from the store (``results.py``)
    tokens_per_attempt: float = math.nan  # prompt and completion tokens of every recorded call

    @property
    def scored_tasks(self) -> list[str]:
        return [t for t, r in self.tasks.items() if r.n]

    @property
    def unscored_tasks(self) -> list[str]:
        """Tasks whose every attempt ended as infra (or without a reward): reported apart, not as 0."""
        return [t for t, r in self.tasks.items() if not r.n]

    def per_task_pass1(self) -> dict[str, float]:
        return {t: r.c / r.n for t, r in self.tasks.items() if r.n}


def cell_figures(checkpoint: str, harness: str, attempts: Iterable[Attempt], *, success_at: float, k: int,
                 task_ids: Sequence[str] | None = None, resamples: int = 2000, level: float = 0.95) -> CellFigures:
    """The figures of one cell; ``task_ids`` lists the task set (a task without attempts shows as unscored)."""
    by_task: dict[str, list[Attempt]] = defaultdict(list)
    for task_id in task_ids or ():
        by_task[task_id] = []
    every = list(attempts)
    for a in every:
        by_task[a.rollout.task_id].append(a)
    tasks = {t: TaskResult(t, tuple(a), success_at) for t, a in by_task.items()}
    scored = [r for r in tasks.values() if r.n]

    def ci(values: Sequence[float]) -> Interval:
        return bootstrap(values, resamples=resamples, level=level)

    pass1 = ci([r.c / r.n for r in scored])
    at_k = [p for r in scored if (p := r.pass_at(k)) is not None]
    passk = ci(at_k)
    reward = ci([statistics.fmean(r.rewards) for r in scored])
    secs = [s for a in every if (s := a.seconds) is not None]
    return CellFigures(checkpoint, harness, k, tasks, pass1, passk, len(at_k), reward, len(every),
                       [a for a in every if a.infra], statistics.fmean(secs) if secs else math.nan)


def held_out_score(attempts: Sequence[Attempt]) -> tuple[float, dict[str, float]]:
    """``train``'s evaluation: the mean reward over scored tasks (NaN if none) and each scored task's reward."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for a in attempts:
        if a.scored and a.reward is not None:
            by_task[a.rollout.task_id].append(a.reward)
    per_task = {t: statistics.fmean(v) for t, v in by_task.items()}
    return (statistics.fmean(per_task.values()) if per_task else math.nan), per_task


@dataclass(frozen=True)
class Comparison:
    """``a`` minus ``b`` in pass@1 over the tasks both scored, paired by task."""

    a: CellFigures
    b: CellFigures
    difference: Interval
    tasks: int

    @property
    def verdict(self) -> str:
        d = self.difference
        if math.isnan(d.value):
            return "no task scored in both"
        if not d.excludes_zero():
            return f"no clear difference ({d.level:.0%} interval includes 0)"
        better, worse = (self.a, self.b) if d.value > 0 else (self.b, self.a)
        return f"{label(better)} better than {label(worse)} by {abs(d.value):.3f}"


def label(cell: CellFigures) -> str:
    return f"{cell.checkpoint} / {cell.harness}"


def compare(a: CellFigures, b: CellFigures, *, resamples: int = 2000, level: float = 0.95) -> Comparison:
    diff, n = paired_difference(a.per_task_pass1(), b.per_task_pass1(), resamples=resamples, level=level)
    return Comparison(a, b, diff, n)


def comparisons(cells: Sequence[CellFigures], *, resamples: int = 2000, level: float = 0.95) -> list[Comparison]:
    """Every checkpoint against the first in each harness, and every harness against the first for each
    checkpoint: the two questions an eval is run for (did training help; which harness is better)."""
    checkpoints = list(dict.fromkeys(c.checkpoint for c in cells))
    harnesses = list(dict.fromkeys(c.harness for c in cells))
    at = {(c.checkpoint, c.harness): c for c in cells}
    out: list[Comparison] = []
    for h in harnesses:
        for ck in checkpoints[1:]:
            if (ck, h) in at and (checkpoints[0], h) in at:
                out.append(compare(at[ck, h], at[checkpoints[0], h], resamples=resamples, level=level))
    for ck in checkpoints:
        for h in harnesses[1:]:
            if (ck, h) in at and (ck, harnesses[0]) in at:
                out.append(compare(at[ck, h], at[ck, harnesses[0]], resamples=resamples, level=level))
    return out
