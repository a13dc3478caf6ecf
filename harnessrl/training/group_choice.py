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


def groups_to_train(rewards: Sequence[Sequence[float]], k: int) -> list[int]:
    """Indices (in launch order) of the ``k`` groups to train, given each group's scored rewards."""
    if len(rewards) <= k:
        return list(range(len(rewards)))
    best = max((max(g) for g in rewards if g), default=None)

    def rank(i: int) -> tuple[bool, bool, float, int]:
        g = rewards[i]
        varied = len(g) >= 2 and max(g) - min(g) > 1e-12
        holds_best = bool(g) and best is not None and max(g) >= best - 1e-12 and varied
        return (not holds_best, not varied, -(max(g) if g else float("-inf")), i)

    return sorted(sorted(range(len(rewards)), key=rank)[:k])
