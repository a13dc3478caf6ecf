"""Which of a step's groups to train when exploration launched more than the step trains.

``[run] explore_until_reward`` keeps launching groups until an attempt reaches the full reward (or the
step's attempt budget is spent), because early in a run that answer can be rare enough that a step of
``tasks_per_step`` groups usually holds none (docs/training.md, "why a small model learns or stalls").
The extra groups are for *finding* it, not for a larger update: the step still trains ``tasks_per_step``
groups, so its cost and step size stay those of a normal step. A group that found the best reward comes
first (it is what the exploration was for), then groups whose rewards differ (they carry a gradient),
then launch order; the groups left out stay recorded, untrained.
"""

from __future__ import annotations

from collections.abc import Sequence


def varied(rewards: Sequence[float]) -> bool:
    """Whether a group's scored rewards differ (a non-zero advantage somewhere: the group carries a gradient)."""
    return len(rewards) >= 2 and max(rewards) - min(rewards) > 1e-12


def reached(rewards: Sequence[Sequence[float]], target: float) -> bool:
    """Whether some scored attempt of the groups has at least the reward ``target``."""
    return any(v >= target - 1e-12 for g in rewards for v in g)


def groups_to_train(rewards: Sequence[Sequence[float]], k: int) -> list[int]:
    """Indices (in launch order) of the ``k`` groups to train, given each group's scored rewards."""
    if len(rewards) <= k:
        return list(range(len(rewards)))
    best = max((max(g) for g in rewards if g), default=None)

    def rank(i: int) -> tuple[bool, bool, float, int]:
        g = rewards[i]
        holds_best = varied(g) and best is not None and max(g) >= best - 1e-12
        return (not holds_best, not varied(g), -(max(g) if g else float("-inf")), i)

    return sorted(sorted(range(len(rewards)), key=rank)[:k])
