"""Production feedback in the store, on every driver: numbering per session, unknown and closed sessions,
closing windows (outcome, the ``feedback`` reward, the rollout closed in one transaction), staleness and
trained marks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import NotFound, Store
from harnessrl.store.feedback import (
    DEFAULTED,
    DROPPED,
    FEEDBACK_REWARD,
    OPEN,
    SCORED,
    STALE,
    Feedback,
    FeedbackWindowClosed,
)
from harnessrl.types import RolloutStatus

from ._sessions import NOW, add_session


def mean_or(default: float | None) -> Callable[[Sequence[Feedback]], tuple[float | None, str]]:
    def decide(rows: Sequence[Feedback]) -> tuple[float | None, str]:
        if rows:
            return sum(r.value for r in rows) / len(rows), SCORED
        return (None, DROPPED) if default is None else (default, DEFAULTED)
    return decide


def test_feedback_is_numbered_per_session_and_read_back(store: Store) -> None:
    add_session(store, "s1")
    add_session(store, "s2")
    a = store.add_feedback("support", "s1", "thumbs", 1.0, now=NOW)
    b = store.add_feedback("support", "s1", "resolved", 0.0, now=NOW + 1)
    c = store.add_feedback("support", "s2", "thumbs", -1, now=NOW)
    assert (a.index, b.index, c.index) == (0, 1, 0)
    rows = store.get_feedback("support", "s1")
    assert [(r.index, r.name, r.value, r.created_at) for r in rows] == [(0, "thumbs", 1.0, NOW),
                                                                          (1, "resolved", 0.0, NOW + 1)]
    assert store.get_feedback("support", "nobody") == []


def test_unknown_session_and_closed_window_are_refused(store: Store) -> None:
    add_session(store, "s1", closes_at=NOW + 5)
    with pytest.raises(NotFound, match="session 'nope'"):
        store.add_feedback("support", "nope", "thumbs", 1.0, now=NOW)
    with pytest.raises(NotFound):
        store.add_feedback("other", "s1", "thumbs", 1.0, now=NOW)  # a session belongs to one deployment
    with pytest.raises(FeedbackWindowClosed, match="closed at") as info:
        store.add_feedback("support", "s1", "thumbs", 1.0, now=NOW + 5)
    assert info.value.closes_at == NOW + 5
    with pytest.raises(ValueError, match="finite"):
        store.add_feedback("support", "s1", "thumbs", float("nan"), now=NOW)
    assert store.get_feedback("support", "s1") == []


def test_closing_a_recorded_session_writes_outcome_reward_and_closes_its_rollout(store: Store) -> None:
    rid = add_session(store, "s1", closes_at=NOW + 10)
    assert rid is not None
    store.add_feedback("support", "s1", "thumbs", 1.0, now=NOW)
    store.add_feedback("support", "s1", "thumbs", 0.0, now=NOW + 1)
    assert store.due_windows(NOW + 9) == []
    assert store.close_window("support", "s1", mean_or(None), now=NOW + 9) is None  # not due yet
    due = store.due_windows(NOW + 10)
    assert [(w.deployment, w.id, w.rollout_id) for w in due] == [("support", "s1", rid)]
    closed = store.close_window("support", "s1", mean_or(None), now=NOW + 10)
    assert closed is not None and (closed.outcome, closed.outcome_status) == (0.5, SCORED)
    rewards = store.get_rewards(rid)
    assert [(r.name, r.value, r.call_index) for r in rewards] == [(FEEDBACK_REWARD, 0.5, None)]
    assert rollout_reward(rewards) == 0.5  # the outcome rule reads it as the rollout's reward
    rollout = store.get_rollout(rid)
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.finished_at == NOW + 10
    # closed once: a second close does nothing, late feedback is refused, nothing is due any more
    assert store.close_window("support", "s1", mean_or(None), now=NOW + 11) is None
    with pytest.raises(FeedbackWindowClosed):
        store.add_feedback("support", "s1", "thumbs", 1.0, now=NOW + 2)  # before closes_at, but decided
    assert store.due_windows(NOW + 100) == []
    assert len(store.get_rewards(rid)) == 1


def test_missing_feedback_is_defaulted_or_dropped(store: Store) -> None:
    rid_default = add_session(store, "quiet", closes_at=NOW, rollout_status=RolloutStatus.QUEUED)
    rid_drop = add_session(store, "silent", closes_at=NOW)
    add_session(store, "unrecorded", recorded=False, closes_at=NOW)
    d = store.close_window("support", "quiet", mean_or(0.25), now=NOW)
    assert d is not None and (d.outcome, d.outcome_status) == (0.25, DEFAULTED)
    assert rid_default is not None and [r.value for r in store.get_rewards(rid_default)] == [0.25]
    assert store.get_rollout(rid_default).status == RolloutStatus.SUCCEEDED  # queued -> running -> succeeded
    x = store.close_window("support", "silent", mean_or(None), now=NOW)
    assert x is not None and (x.outcome, x.outcome_status) == (None, DROPPED)
    assert rid_drop is not None and store.get_rewards(rid_drop) == []
    assert store.get_rollout(rid_drop).status == RolloutStatus.SUCCEEDED  # closed, no reward: never trained
    u = store.close_window("support", "unrecorded", mean_or(1.0), now=NOW)
    assert u is not None and (u.outcome, u.outcome_status, u.rollout_id) == (1.0, DEFAULTED, None)


def test_a_bad_decision_writes_nothing(store: Store) -> None:
    rid = add_session(store, "s1", closes_at=NOW)
    with pytest.raises(ValueError, match="dropped without"):
        store.close_window("support", "s1", lambda rows: (None, SCORED), now=NOW)
    assert store.get_session_window("support", "s1").outcome_status == OPEN
    assert rid is not None and store.get_rollout(rid).status == RolloutStatus.RUNNING


def test_trainable_stale_and_trained_marks(store: Store) -> None:
    for sid, version in (("old", 0), ("mid", 1), ("new", 2)):
        add_session(store, sid, version=version, closes_at=NOW)
        store.add_feedback("support", sid, "thumbs", float(version), now=NOW - 1)
        store.close_window("support", sid, mean_or(None), now=NOW)
    add_session(store, "dropped", version=2, closes_at=NOW)
    store.close_window("support", "dropped", mean_or(None), now=NOW)
    add_session(store, "unrecorded", recorded=False, version=2, closes_at=NOW)
    store.close_window("support", "unrecorded", mean_or(1.0), now=NOW)
    add_session(store, "open", version=2, closes_at=NOW + 50)
    assert [w.id for w in store.trainable_sessions("support", min_version=1)] == ["mid", "new"]
    assert store.drop_stale_sessions("support", min_version=1) == 1
    assert store.drop_stale_sessions("support", min_version=1) == 0  # counted once
    assert store.get_session_window("support", "old").trained_version == STALE
    assert store.mark_sessions_trained("support", ["mid", "new", "old"], 3) == 2  # the stale one stays stale
    assert store.mark_sessions_trained("support", ["mid"], 4) == 0  # never trained twice
    assert store.trainable_sessions("support", min_version=0) == []
    assert store.trained_outcomes("support") == [(3, 1.0), (3, 2.0)]


def test_feedback_racing_the_close_is_counted_or_refused_never_lost(store: Store) -> None:
    """Threads post feedback while the window closes: every accepted signal is in the outcome."""
    add_session(store, "s1", closes_at=time.time() + 0.3)
    accepted: list[float] = []
    stop = threading.Event()

    def post(value: float) -> None:
        while not stop.is_set():
            try:
                accepted.append(store.add_feedback("support", "s1", "n", value).value)
            except FeedbackWindowClosed:
                return

    threads = [threading.Thread(target=post, args=(float(i),)) for i in range(3)]
    for t in threads:
        t.start()
    closed = None
    while closed is None:
        closed = store.close_window("support", "s1", mean_or(None))
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join()
    assert accepted and closed.outcome == pytest.approx(sum(accepted) / len(accepted))
    assert len(store.get_feedback("support", "s1")) == len(accepted)
