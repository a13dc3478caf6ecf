"""Splitting a step's batch into PPO mini-batches of whole rollouts.

A step may take several optimizer updates (``mini_batches`` x ``ppo_epochs``). Each mini-batch holds whole
rollouts, so the ``rollout`` normalization still gives every rollout of a mini-batch the same weight, and
the split is a pure function of the samples and a seed, so every data-parallel rank and every resumed run
makes the same one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from harnessrl.types import Sample


def split_by_rollout(samples: Sequence[Sample], n: int, seed: int) -> list[list[Sample]]:
    """``min(n, num_rollouts)`` non-empty parts with rollout counts differing by at most one.

    Rollouts are shuffled with ``seed`` first (groups of one task would otherwise land in one part);
    inside a part, samples keep their original order.
    """
    if n < 1:
        raise ValueError(f"mini_batches must be >= 1, got {n}")
    order: dict[str, int] = {}
    for s in samples:
        order.setdefault(s.rollout_id, len(order))
    rollouts = list(order)
    random.Random(seed).shuffle(rollouts)
    n = min(n, len(rollouts))
    part_of = {rid: i * n // len(rollouts) for i, rid in enumerate(rollouts)}
    parts: list[list[Sample]] = [[] for _ in range(n)]
    for s in samples:
        parts[part_of[s.rollout_id]].append(s)
    return parts
