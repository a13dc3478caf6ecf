"""From finished rollouts (rows, calls, rewards) to one training batch: samples with advantages + counts.

This is the controller's entry point into training: ``prepare_batch`` (already-loaded data) or
``batch_from_store`` (reads calls and rewards from the store). Groups are passed whole: advantages are
computed within each group before anything is split into micro-batches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harnessrl.rewards.posted import trained_rewards
from harnessrl.store.base import Store
from harnessrl.training.advantages import RolloutRecord, compute_advantages
from harnessrl.training.config import TrainingConfig
from harnessrl.training.samples import build_samples
from harnessrl.types import Call, Reward, Rollout, Sample, SampleFidelity


@dataclass(slots=True)
class TrainBatch:
    """Samples ready for ``Trainer.step`` plus the numbers the step reports.

    ``rewards``: each scored rollout's reward (zero-variance groups included); ``advantages``: the
    rollouts actually trained; ``counts``: exclusions, overflow, fidelity and group outcomes.
    """

    samples: list[Sample]
    rewards: dict[str, float] = field(default_factory=dict)
    advantages: dict[str, float] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)


def prepare_batch(
    rollouts: Iterable[tuple[Rollout, Sequence[Call], Sequence[Reward]]], config: TrainingConfig
) -> TrainBatch:
    """Build samples for every rollout, then advantages within each group."""
    records: list[RolloutRecord] = []
    counts: Counter[str] = Counter()
    for rollout, calls, rewards in rollouts:
        built = build_samples(calls, rollout.group_id, config.samples, rollout_id=rollout.id)
        counts.update(built.counts)
        # Re-tokenized text (imported, a teacher's) has no behaviour logprobs to take a ratio against: SFT only.
        retokenized = [s for s in built.samples if s.fidelity == SampleFidelity.RETOKENIZED]
        if retokenized:
            counts["excluded.retokenized_samples"] += len(retokenized)
            built.samples = [s for s in built.samples if s.fidelity != SampleFidelity.RETOKENIZED]
        # Harness posts that scoring recorded without training them ([rewards] posted) stay out.
        records.append(RolloutRecord(rollout=rollout, rewards=trained_rewards(rewards), samples=built.samples))
    adv = compute_advantages(records, config)
    counts.update(adv.counts)
    return TrainBatch(samples=adv.samples, rewards=adv.rewards, advantages=adv.advantages, counts=counts)


def batch_from_store(store: Store, rollouts: Iterable[Rollout | str], config: TrainingConfig) -> TrainBatch:
    """``prepare_batch`` reading each rollout's calls and rewards from the store."""
    items = []
    for r in rollouts:
        rollout = store.get_rollout(r) if isinstance(r, str) else r
        items.append((rollout, store.get_calls(rollout.id), store.get_rewards(rollout.id)))
    return prepare_batch(items, config)
