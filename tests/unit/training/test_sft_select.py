"""The [sft] query over a real store: runs, split, status, policy versions, min_reward, best_k; step order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.drivers.sft import step_rollouts
from harnessrl.sft.config import SftConfig
from harnessrl.sft.select import Selected, select_rollouts, sft_batch
from harnessrl.store import Store, open_store
from harnessrl.store.base import NewCall
from harnessrl.training.config import SampleConfig
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    s.create_run("a", {}, run_id="a")
    s.create_run("b", {}, run_id="b")
    rows = [  # run, task, split, version, reward, status
        ("a", "t1", "train", 0, 1.0, "succeeded"), ("a", "t1", "train", 1, 0.5, "succeeded"),
        ("a", "t1", "train", 2, 1.0, "succeeded"), ("a", "t2", "train", 0, 0.0, "succeeded"),
        ("a", "t2", "eval", 0, 1.0, "succeeded"), ("a", "t3", "train", 3, 1.0, "failed"),
        ("b", "t1", "train", 0, 1.0, "succeeded"), ("a", "t4", "train", 0, None, "succeeded"),
    ]
    for i, (run, task, split, version, reward, status) in enumerate(rows):
        r = s.create_rollout(task_id=task, input={}, group_id=f"g{i}", api_key_hash="h", run_id=run, step=1,
                             policy_version=version, metadata={"split": split}, rollout_id=f"r{i}")
        s.transition_rollout(r.id, RolloutStatus.RUNNING)
        s.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {}, None, [1, 2, i], [
            ChoiceTokens([5, 6], [-0.5, -0.25], "stop")], version, sampling={"temperature": 0.7})])
        if reward is not None:
            s.add_reward(r.id, reward, "final")
        s.transition_rollout(r.id, RolloutStatus(status),
                             failure_kind=FailureKind.AGENT if status == "failed" else None)
    return s


def _ids(selected: list[Selected]) -> list[str]:
    return [s.rollout.id for s in selected]


def test_the_query_filters(store: Store) -> None:
    assert _ids(select_rollouts(store, SftConfig())) == ["r0", "r1", "r2", "r3", "r7", "r6"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], min_reward=1.0))) == ["r0", "r2"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], split="eval"))) == ["r4"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], split="any", min_reward=1.0))) == ["r0", "r2", "r4"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], status=[RolloutStatus.FAILED]))) == ["r5"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], min_policy_version=1, max_policy_version=2))) == [
        "r1", "r2"]
    assert _ids(select_rollouts(store, SftConfig(), exclude_runs=["a"])) == [
        "r6"]
    with pytest.raises(ValueError, match="no run 'zz'"):
        select_rollouts(store, SftConfig(runs=["zz"]))


def test_best_k_keeps_each_tasks_highest_rewards(store: Store) -> None:
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], best_k=1))) == ["r0", "r3", "r7"]
    assert _ids(select_rollouts(store, SftConfig(runs=["a"], best_k=2))) == ["r0", "r2", "r3", "r7"]


def test_sft_samples_are_the_recorded_tokens_untempered_with_advantage_one(store: Store) -> None:
    batch = sft_batch(store, select_rollouts(store, SftConfig(runs=["a"], min_reward=1.0)), SampleConfig())
    assert [s.token_ids for s in batch.samples] == [[1, 2, 0, 5, 6], [1, 2, 2, 5, 6]]
    assert all(s.loss_mask == [0, 0, 0, 1, 1] and s.advantage == 1.0 and s.temperatures is None
               for s in batch.samples)
    assert batch.rewards == {"r0": 1.0, "r2": 1.0}


def test_step_order_is_a_seeded_shuffle_over_epochs() -> None:
    pool = [Selected(rollout=None, reward=float(i)) for i in range(5)]  # type: ignore[arg-type]
    steps = [[s.reward for s in step_rollouts(pool, k, 2, seed=3)] for k in range(1, 6)]
    assert steps == [[s.reward for s in step_rollouts(pool, k, 2, seed=3)] for k in range(1, 6)]  # resume
    flat = [x for st in steps for x in st]
    assert sorted(flat[:5]) == [0.0, 1.0, 2.0, 3.0, 4.0]  # every rollout once per epoch
    assert sorted(flat[5:10]) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [s.reward for s in step_rollouts(pool[:1], 1, 4, seed=0)] == [0.0]  # never more than the pool


def test_greedy_calls_are_sft_targets_though_rl_leaves_them_out(tmp_path: Path) -> None:
    s = open_store(f"sqlite:///{tmp_path / 'g.db'}")
    s.create_run("g", {}, run_id="g")
    r = s.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id="g", rollout_id="r")
    s.transition_rollout(r.id, RolloutStatus.RUNNING)
    s.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {}, None, [1, 2], [ChoiceTokens([3], [0.0], "stop")],
                            0, sampling={"temperature": 0.0})])
    s.add_reward(r.id, 1.0, "final")
    s.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    from harnessrl.training.samples import build_samples

    assert build_samples(s.get_calls(r.id), "g").samples == []  # RL: excluded.greedy
    batch = sft_batch(s, select_rollouts(s, SftConfig()), SampleConfig())
    assert [x.token_ids for x in batch.samples] == [[1, 2, 3]] and batch.counts["sft.greedy_calls"] == 1
