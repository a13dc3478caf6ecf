"""Advantages of production sessions: outcome minus a baseline, one scalar per session's rollout.

Production traffic has no groups of ``n`` attempts at one task, so the baseline is a **running mean** of
the outcomes trained so far: an exponential moving average over training steps (``baseline_decay``),
updated *after* a step's advantages are taken, so a session's own outcome is never in its baseline. The
first step, with no history, uses its own mean. With ``group_by = "task"``, sessions that opened with the
same prompt (same system and first user message, token for token) form a group, and a group of two or
more uses its own mean as the baseline (as ``dr_grpo`` does within a task group); single sessions fall
back to the running mean. Outcomes are not divided by a standard deviation: a running baseline has none
that belongs to the batch. The state is rebuilt from the store after a restart (``Store.trained_outcomes``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby


class RunningMean:
    """An exponential moving average of per-step mean outcomes (``decay`` weighs the past)."""

    def __init__(self, decay: float = 0.9) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.value: float | None = None
        self.steps = 0

    def baseline(self, outcomes: Sequence[float]) -> float:
        """The baseline of this step: the average so far, or (first step) the step's own mean."""
        if self.value is not None:
            return self.value
        return statistics.fmean(outcomes) if outcomes else 0.0

    def update(self, outcomes: Sequence[float]) -> None:
        """Fold one trained step's outcomes in."""
        if not outcomes:
            return
        mean = statistics.fmean(outcomes)
        self.value = mean if self.value is None else self.decay * self.value + (1.0 - self.decay) * mean
        self.steps += 1

    @classmethod
    def replay(cls, decay: float, trained: Iterable[tuple[int, float]]) -> RunningMean:
        """The state after the steps recorded as ``(trained_version, outcome)`` pairs, in version order."""
        rm = cls(decay)
        for _, rows in groupby(sorted(trained, key=lambda t: t[0]), key=lambda t: t[0]):
            rm.update([o for _, o in rows])
        return rm


def session_advantages(outcomes: Mapping[str, float], baseline: RunningMean,
                       groups: Mapping[str, str] | None = None) -> dict[str, float]:
    """Advantage per session id: minus its group's mean (groups of 2+, when ``groups`` maps id -> task
    key), else minus the running baseline. Pure: ``baseline`` is read, not updated."""
    base = baseline.baseline(list(outcomes.values()))
    members: dict[str, list[str]] = defaultdict(list)
    for sid in outcomes:
        if groups is not None and sid in groups:
            members[groups[sid]].append(sid)
    out = {sid: value - base for sid, value in outcomes.items()}
    for ids in members.values():
        if len(ids) >= 2:
            mean = statistics.fmean(outcomes[s] for s in ids)
            out.update({s: outcomes[s] - mean for s in ids})
    return out


def min_served_version(trainer_version: int, max_staleness: int) -> int:
    """The oldest serving version a session may have to be trained by a trainer at ``trainer_version``."""
    return trainer_version - max_staleness
