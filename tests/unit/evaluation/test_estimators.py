"""pass@k against counting every draw, and the bootstrap's intervals (issue 52)."""

from __future__ import annotations

import itertools
import math

import pytest

from harnessrl.evaluation.estimators import bootstrap, paired_difference, pass_at_k


def _by_counting(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n attempts (c of them successes) that hold a success."""
    attempts = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(range(n), k))
    return sum(any(attempts[i] for i in d) for d in draws) / len(draws)


@pytest.mark.parametrize(("n", "c", "k"), [(n, c, k) for n in range(1, 8) for c in range(n + 1) for k in range(1, n + 1)])
def test_pass_at_k_is_the_share_of_k_draws_that_hold_a_success(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(_by_counting(n, c, k))


def test_pass_at_1_is_the_success_rate_and_pass_at_k_grows_with_k() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    values = [pass_at_k(10, 3, k) for k in range(1, 11)]
    assert values == sorted(values) and values[-1] == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_the_interval_holds_the_mean_is_seeded_and_narrows_with_more_tasks() -> None:
    few = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    a, b = bootstrap(few), bootstrap(few)
    assert a == b and a.value == pytest.approx(0.5) and a.low < a.value < a.high
    many = bootstrap(few * 20)
    assert many.high - many.low < a.high - a.low


def test_no_tasks_is_not_a_number_and_one_task_has_no_width() -> None:
    assert math.isnan(bootstrap([]).value)
    one = bootstrap([0.25])
    assert (one.low, one.value, one.high) == (0.25, 0.25, 0.25)


def test_a_paired_difference_uses_only_the_tasks_both_scored() -> None:
    a = {"t1": 1.0, "t2": 1.0, "t3": 0.5, "only-a": 0.0}
    b = {"t1": 0.0, "t2": 0.0, "t3": 0.5, "only-b": 1.0}
    diff, n = paired_difference(a, b)
    assert n == 3 and diff.value == pytest.approx(2 / 3)
    same, _ = paired_difference(a, a)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0) and not same.excludes_zero()
