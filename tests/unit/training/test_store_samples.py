"""Samples and advantages built from calls recorded in the real store (SQLite in memory)."""

from __future__ import annotations

import pytest

from harnessrl.store import NewCall, open_store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus, SampleFidelity

pytest.importorskip("harnessrl.store.sqlite")


def _call(rid: str, prompt: list[int], completion: list[int], status=CallStatus.OK, version=0) -> NewCall:
    choices = [ChoiceTokens(completion, [-0.25] * len(completion))] if completion else []
    return NewCall(rollout_id=rid, api=ApiKind.CHAT, status=status, request={"messages": []}, response=None,
                   prompt_token_ids=prompt, choices=choices, policy_version=version)


@pytest.fixture
def store():
    s = open_store("sqlite:///:memory:")
    yield s
    s.close()


def _finish(store, rid, status=RolloutStatus.SUCCEEDED, failure=None):
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.transition_rollout(rid, status, failure_kind=failure)


def test_batch_from_store_merges_splits_and_scores(store):
    ids = [store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash=f"h{i}").id for i in range(4)]
    a, b, c, d = ids
    store.record_calls([_call(a, [1, 2, 3], [4, 5]), _call(b, [1, 2, 3], [6])])
    store.record_calls([_call(a, [1, 2, 3, 4, 5, 7], [8], version=1),  # prefix kept: merged
                        _call(b, [1, 2, 3, 6, 7], [], status=CallStatus.ERROR),  # errored: excluded
                        _call(b, [1, 9, 3, 6, 7], [10])])  # history edited: split
    store.record_calls([_call(c, [1, 2, 3], [11]), _call(d, [1, 2, 3], [12])])
    for rid, value in [(a, 1.0), (b, 0.0), (c, 0.0), (d, 0.0)]:
        store.add_reward(rid, value)
    _finish(store, a)
    _finish(store, b, RolloutStatus.FAILED, FailureKind.AGENT)
    _finish(store, c)
    _finish(store, d, RolloutStatus.FAILED, FailureKind.INFRA)

    batch = batch_from_store(store, ids, TrainingConfig(estimator="dr_grpo"))

    by_rollout: dict[str, list] = {}
    for s in batch.samples:
        by_rollout.setdefault(s.rollout_id, []).append(s)
    assert set(by_rollout) == {a, b, c}  # d failed for infra reasons: out of its group
    (sa,) = by_rollout[a]
    assert sa.token_ids == [1, 2, 3, 4, 5, 7, 8] and sa.loss_mask == [0, 0, 0, 1, 1, 0, 1]
    assert sa.fidelity == SampleFidelity.MERGED and sa.policy_versions == [0, 1]
    assert sa.behaviour_logprobs == [0, 0, 0, -0.25, -0.25, 0, -0.25]
    first_b, second_b = by_rollout[b]
    assert second_b.fidelity == SampleFidelity.SPLIT and second_b.fidelity_reason == "prefix broken at token 1 of 4"
    assert batch.counts["excluded.status_error"] == 1 and batch.counts["rollouts.infra_failure"] == 1
    # group mean over a, b, c = 1/3 (d's 0 is not in it): advantages 2/3, -1/3, -1/3
    assert batch.advantages == pytest.approx({a: 2 / 3, b: -1 / 3, c: -1 / 3})
    assert first_b.advantage == second_b.advantage == pytest.approx(-1 / 3)
