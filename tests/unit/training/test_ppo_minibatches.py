"""Mini-batches hold whole rollouts, are balanced, and do not depend on anything but samples and seed."""

from __future__ import annotations

import pytest

from harnessrl.training.ppo_minibatches import split_by_rollout

from ._helpers import make_sample


def _samples(rollouts: int, per: int) -> list:
    return [make_sample([1, 2, 3, 4], [0, 0, 1, 1], rollout_id=f"r{r}") for r in range(rollouts) for _ in range(per)]


def test_parts_hold_whole_rollouts_and_are_balanced():
    samples = _samples(7, 3)
    parts = split_by_rollout(samples, 3, seed=1)
    assert len(parts) == 3
    owners = [{s.rollout_id for s in p} for p in parts]
    assert sorted(len(o) for o in owners) == [2, 2, 3]
    assert set().union(*owners) == {f"r{i}" for i in range(7)} and sum(map(len, owners)) == 7  # disjoint
    assert sum(map(len, parts)) == len(samples)


def test_deterministic_for_a_seed_and_clamped_to_the_rollout_count():
    samples = _samples(8, 2)
    ids = lambda parts: [[s.rollout_id for s in p] for p in parts]  # noqa: E731
    assert ids(split_by_rollout(samples, 4, seed=5)) == ids(split_by_rollout(samples, 4, seed=5))
    assert ids(split_by_rollout(samples, 4, seed=5)) != ids(split_by_rollout(samples, 4, seed=6))
    assert len(split_by_rollout(samples, 100, seed=0)) == 8
    assert split_by_rollout([], 3, seed=0) == []
    with pytest.raises(ValueError, match="mini_batches"):
        split_by_rollout(samples, 0, seed=0)
