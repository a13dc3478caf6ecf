"""Combination rules of session feedback, worked by hand."""

from __future__ import annotations

import pytest

from harnessrl.production.combine import combine, decide_outcome
from harnessrl.production.config import FeedbackConfig
from harnessrl.store.feedback import DEFAULTED, DROPPED, SCORED, Feedback


def rows(*signals: tuple[str, float]) -> list[Feedback]:
    return [Feedback("d", "s", name, value, 100.0 + i, i) for i, (name, value) in enumerate(signals)]


SIGNALS = rows(("thumbs", 1.0), ("resolved", 0.0), ("thumbs", 0.5))


@pytest.mark.parametrize(("rule", "expected"), [("mean", 0.5), ("last", 0.5), ("min", 0.0)])
def test_rules(rule: str, expected: float) -> None:
    assert combine(SIGNALS, rule) == pytest.approx(expected)


def test_last_is_by_index_not_by_list_order() -> None:
    assert combine(list(reversed(SIGNALS)), "last") == 0.5


def test_weighted_takes_each_names_latest_value() -> None:
    # thumbs: latest 0.5 (the 1.0 was replaced); resolved 0.0: (3 * 0.5 + 1 * 0.0) / 4
    assert combine(SIGNALS, "weighted", {"thumbs": 3.0, "resolved": 1.0}) == pytest.approx(0.375)
    # a name without weight does not count; only unweighted names: nothing counts
    assert combine(SIGNALS, "weighted", {"thumbs": 1.0}) == pytest.approx(0.5)
    assert combine(SIGNALS, "weighted", {"conversion": 1.0}) is None


def test_no_signal_and_unknown_rule() -> None:
    assert combine([], "mean") is None
    with pytest.raises(ValueError, match="mean, last, min or weighted"):
        combine(SIGNALS, "median")


def test_missing_drops_or_defaults() -> None:
    assert decide_outcome([], FeedbackConfig(missing="drop")) == (None, DROPPED)
    assert decide_outcome([], FeedbackConfig(missing=0.25)) == (0.25, DEFAULTED)
    assert decide_outcome(SIGNALS, FeedbackConfig(missing=0.25, combine="min")) == (0.0, SCORED)
    weighted = FeedbackConfig(combine="weighted", weights={"conversion": 1.0}, missing=-1.0)
    assert decide_outcome(SIGNALS, weighted) == (-1.0, DEFAULTED)  # rated, but by no counted signal
