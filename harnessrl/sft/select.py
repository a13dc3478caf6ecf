"""Which recorded rollouts SFT trains on, and their samples as SFT targets.

The query (``[sft]``) reads only rollout rows and rewards; samples are built by the same
``build_samples`` RL uses, so the targets are exactly the tokens the policy (or a teacher) sampled and
the context keeps loss mask 0. An SFT sample is trained at temperature 1 (the model's own distribution,
whatever temperature sampled it) and every one weighs by the batch's normalization (``rollout``: each
rollout the same, however long).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harnessrl.rewards.outcome import rollout_reward
from harnessrl.sft.config import SftConfig
from harnessrl.store import Store
from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import TrainBatch
from harnessrl.types import Call, FailureKind, Rollout, Sample, SampleFidelity


@dataclass(slots=True)
class Selected:
    """A rollout the query kept, with its outcome reward."""

    rollout: Rollout
    reward: float | None


def select_rollouts(store: Store, query: SftConfig, *, exclude_runs: Iterable[str] = ()) -> list[Selected]:
    """The rollouts ``query`` names: runs, split, status, policy versions, ``min_reward``, then ``best_k``."""
    excluded = set(exclude_runs)
    runs = query.runs or [r.id for r in store.list_runs() if r.id not in excluded]
    known = {r.id for r in store.list_runs()}
    missing = [r for r in runs if r not in known]
    if missing:
        raise ValueError(f"[sft] runs: no run {', '.join(map(repr, missing))} in the store; `harnessrl rollouts "
                         "--db URL` lists rollouts with their runs")
    kept: list[Selected] = []
    for run_id in runs:
        for status in query.status:
            for r in store.iter_rollouts(run_id=run_id, status=status):
                if query.split != "any" and r.metadata.get("split", "train") != query.split:
                    continue
                if query.min_policy_version is not None and r.policy_version < query.min_policy_version:
                    continue
                if query.max_policy_version is not None and r.policy_version > query.max_policy_version:
                    continue
                reward = rollout_reward(store.get_rewards(r.id))
                if query.min_reward is not None and (reward is None or reward < query.min_reward):
                    continue
                kept.append(Selected(r, reward))
    if query.best_k is not None:
        kept = best_k(kept, query.best_k)
    return kept


def best_k(selected: Sequence[Selected], k: int) -> list[Selected]:
    """Per task, the ``k`` highest-reward rollouts (no reward ranks last; ties keep the earlier), in input order."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(selected):
        by_task[s.rollout.task_id].append(i)
    keep: set[int] = set()
    for idx in by_task.values():
        ranked = sorted(idx, key=lambda i: (selected[i].reward is None, -(selected[i].reward or 0.0), i))
        keep.update(ranked[:k])
    return [s for i, s in enumerate(selected) if i in keep]


def _greedy_as_target(call: Call, counts: Counter[str]) -> Call:
    """RL leaves greedy calls out (no sampling distribution to take a ratio against); SFT needs no ratio,
    and a teacher's or an evaluation's greedy answers are good targets."""
    if call.sampling.get("temperature") is None or float(call.sampling["temperature"]) > 0.0:
        return call
    counts["sft.greedy_calls"] += 1
    return dataclasses.replace(call, sampling={**call.sampling, "temperature": 1.0})


def sft_samples(store: Store, rollouts: Sequence[Rollout], config: SampleConfig, *,
                include_retokenized: bool = True) -> tuple[list[Sample], Counter[str]]:
    """Every sample of ``rollouts`` as an SFT target (advantage 1, untempered), plus the build counts."""
    counts: Counter[str] = Counter()
    out: list[Sample] = []
    for r in rollouts:
        calls = [_greedy_as_target(c, counts) for c in store.get_calls(r.id)]
        built = build_samples(calls, r.group_id, config, rollout_id=r.id)
        counts.update(built.counts)
        for s in built.samples:
            if s.fidelity == SampleFidelity.RETOKENIZED and not include_retokenized:
                counts["excluded.retokenized_samples"] += 1
                continue
            out.append(dataclasses.replace(s, advantage=1.0, token_advantages=None, temperatures=None))
    return out, counts


def sft_batch(store: Store, selected: Sequence[Selected], config: SampleConfig, *,
              include_retokenized: bool = True) -> TrainBatch:
    """A ``TrainBatch`` of ``selected``'s samples for ``Trainer.step`` with ``objective = "sft"``."""
    samples, counts = sft_samples(store, [s.rollout for s in selected], config,
                                  include_retokenized=include_retokenized)
    rewards = {s.rollout.id: s.reward for s in selected if s.reward is not None}
    return TrainBatch(samples=samples, rewards=rewards, advantages={}, counts=counts)


def rft_batch(store: Store, rollouts: Sequence[Rollout], threshold: float, config: SampleConfig) -> TrainBatch:
    """Rejection sampling (``[run] mode = "rft"``): a step's scored attempts at or above ``threshold``, as SFT
    targets. Infra failures are never scored; the rest are counted as kept or rejected."""
    selected: list[Selected] = []
    counts: Counter[str] = Counter()
    rewards: dict[str, float] = {}
    for r in rollouts:
        if r.failure_kind == FailureKind.INFRA:
            continue
        reward = rollout_reward(store.get_rewards(r.id))
        if reward is None:
            counts["rft.unscored"] += 1
            continue
        rewards[r.id] = reward
        if reward >= threshold:
            selected.append(Selected(r, reward))
        else:
            counts["rft.rejected"] += 1
    counts["rft.kept"] += len(selected)
    batch = sft_batch(store, selected, config)
    batch.counts.update(counts)
    batch.rewards = rewards  # the step's reward curve is every attempt's, not only the kept ones
    return batch
