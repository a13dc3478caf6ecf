"""Exploration launches more groups than a step trains: which ones it trains."""

from __future__ import annotations

from harnessrl.training.group_choice import groups_to_train


def test_all_groups_train_when_there_are_not_more_than_the_step_trains() -> None:
    assert groups_to_train([[0, 0.25], [0, 0]], 2) == [0, 1]
    assert groups_to_train([], 6) == []


def test_the_group_that_found_the_best_reward_is_trained_first() -> None:
    rewards = [[0, 0.25, 0, 0], [0.25, 0.25, 0.25, 0.25], [0, 0, 0.25, 0], [0.25, 1.0, 0, 0], [0, 0, 0, 0]]
    assert groups_to_train(rewards, 2) == [0, 3]  # the 1.0 group, then the first varied one
    assert groups_to_train(rewards, 1) == [3]


def test_varied_groups_before_flat_ones_and_launch_order_among_equals() -> None:
    rewards = [[0.25] * 4, [0, 0, 0, 0], [0, 0.25, 0, 0], [0, 0, 0.25, 0.25], [0.25, 0, 0, 0]]
    assert groups_to_train(rewards, 3) == [2, 3, 4]
    # flat groups only when there are not enough varied ones: the higher-scoring flat group first
    assert groups_to_train(rewards, 4) == [0, 2, 3, 4]


def test_a_flat_group_of_full_rewards_does_not_displace_a_varied_one() -> None:
    rewards = [[1.0, 1.0], [0, 0.25], [0, 1.0]]
    assert groups_to_train(rewards, 1) == [2]
    assert groups_to_train(rewards, 2) == [1, 2]
