"""One cell's figures: infra is never a failure, unscored tasks are apart, pass@k over tasks with k attempts."""

from __future__ import annotations

import math

import pytest

from harnessrl.evaluation.figures import cell_figures, compare, held_out_score

from ._attempts import attempt


def test_infra_attempts_are_counted_apart_and_a_task_with_only_infra_is_unscored() -> None:
    attempts = [attempt("ok", "a", 1.0), attempt("ok", "a", 0.0), attempt("infra", "a"),
                attempt("ok", "b", 0.0), attempt("ok", "b", 0.0),
                attempt("infra", "c"), attempt("infra", "c")]
    cell = cell_figures("base", "h", attempts, success_at=1.0, k=2, task_ids=["a", "b", "c", "d"])
    assert cell.scored_tasks == ["a", "b"] and cell.unscored_tasks == ["c", "d"]  # d: no attempt at all
    assert len(cell.infra) == 3 and cell.attempts == 7
    assert cell.pass1.value == pytest.approx((0.5 + 0.0) / 2)  # never (0.5 + 0 + 0 + 0) / 4
    assert cell.passk.value == pytest.approx((1.0 + 0.0) / 2) and cell.passk_tasks == 2
    assert cell.reward.value == pytest.approx(0.25)


def test_a_partial_reward_counts_in_the_mean_but_is_not_a_success() -> None:
    cell = cell_figures("base", "h", [attempt("ok", "a", 0.25), attempt("ok", "a", 1.0)], success_at=1.0, k=1)
    assert cell.pass1.value == 0.5 and cell.reward.value == pytest.approx(0.625)


def test_pass_at_k_leaves_out_tasks_with_fewer_than_k_scored_attempts() -> None:
    attempts = [attempt("ok", "a", 1.0), attempt("ok", "a", 0.0), attempt("ok", "b", 0.0), attempt("infra", "b")]
    cell = cell_figures("base", "h", attempts, success_at=1.0, k=2)
    assert cell.passk_tasks == 1 and cell.passk.value == 1.0
    assert math.isnan(cell_figures("x", "h", [], success_at=1.0, k=2).pass1.value)


def test_a_clear_improvement_is_called_and_noise_is_not() -> None:
    tasks = [f"t{i}" for i in range(30)]
    base = cell_figures("base", "h", [attempt("ok", t, 0.0) for t in tasks], success_at=1.0, k=1)
    trained = cell_figures("step_8", "h", [attempt("ok", t, 1.0 if i % 10 else 0.0) for i, t in enumerate(tasks)],
                           success_at=1.0, k=1)
    better = compare(trained, base)
    assert better.tasks == 30 and better.difference.excludes_zero()
    assert better.verdict == "step_8 / h better than base / h by 0.900"
    noise = compare(cell_figures("a", "h", [attempt("ok", t, float(i % 2)) for i, t in enumerate(tasks)],
                                 success_at=1.0, k=1),
                    cell_figures("b", "h", [attempt("ok", t, float((i + 1) % 2)) for i, t in enumerate(tasks)],
                                 success_at=1.0, k=1))
    assert noise.verdict.startswith("no clear difference")


def test_the_held_out_score_of_train_leaves_out_infra_and_missing_rewards() -> None:
    mean, per_task = held_out_score([attempt("ok", "a", 1.0), attempt("infra", "b"), attempt("ok", "c", None),
                                     attempt("fail", "d", 0.0)])
    assert per_task == {"a": 1.0, "d": 0.0} and mean == 0.5
