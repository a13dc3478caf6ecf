"""Closing due windows: outcomes by the configured rule, counts per deployment, rewards and rollouts, and
nothing closed early."""

from __future__ import annotations

import asyncio
from collections import Counter

from unit.store._sessions import NOW, add_session

from harnessrl.production.config import FeedbackConfig
from harnessrl.production.windows import WindowCloser, close_due_windows
from harnessrl.store import Store
from harnessrl.store.feedback import DEFAULTED, DROPPED, OPEN, SCORED
from harnessrl.types import RolloutStatus


def test_due_windows_close_with_counts_per_deployment(store: Store) -> None:
    rated = add_session(store, "rated", closes_at=NOW)
    store.add_feedback("support", "rated", "thumbs", 1.0, now=NOW - 5)
    store.add_feedback("support", "rated", "thumbs", 0.0, now=NOW - 4)
    silent = add_session(store, "silent", closes_at=NOW)
    add_session(store, "unrecorded", recorded=False, closes_at=NOW)
    store.add_feedback("support", "unrecorded", "thumbs", 1.0, now=NOW - 1)
    add_session(store, "other-dep", deployment="sales", closes_at=NOW - 1)
    later = add_session(store, "later", closes_at=NOW + 1)

    counts = close_due_windows(store, FeedbackConfig(combine="min", missing=0.5), now=NOW)
    assert counts == {"support": Counter({SCORED: 2, DEFAULTED: 1}), "sales": Counter({DEFAULTED: 1})}
    assert store.get_session_window("support", "rated").outcome == 0.0  # min of 1.0 and 0.0
    assert store.get_session_window("support", "unrecorded").outcome == 1.0
    assert rated is not None and silent is not None and later is not None
    assert [r.value for r in store.get_rewards(silent)] == [0.5]
    assert store.get_rollout(silent).status == RolloutStatus.SUCCEEDED
    assert store.get_session_window("support", "later").outcome_status == OPEN  # not due yet
    assert store.get_rollout(later).status == RolloutStatus.RUNNING
    assert close_due_windows(store, FeedbackConfig(), now=NOW) == {}  # nothing closes twice


def test_missing_drop_and_batches(store: Store) -> None:
    for i in range(7):
        add_session(store, f"s{i}", closes_at=NOW - i)
    store.add_feedback("support", "s3", "thumbs", 1.0, now=NOW - 10)
    counts = close_due_windows(store, FeedbackConfig(missing="drop"), now=NOW, batch=2)
    assert counts == {"support": Counter({DROPPED: 6, SCORED: 1})}
    assert store.due_windows(NOW + 1e9) == []


def test_the_gateway_task_adds_up_totals(store: Store) -> None:
    import time

    add_session(store, "a", closes_at=time.time() - 1)
    closer = WindowCloser(store, FeedbackConfig(missing=0.0))
    assert asyncio.run(closer()) == {"support": Counter({DEFAULTED: 1})}
    add_session(store, "b", closes_at=time.time() - 1)
    store.add_feedback("support", "b", "thumbs", 1.0, now=time.time() - 2)
    asyncio.run(closer())
    assert closer.totals == {"support": Counter({DEFAULTED: 1, SCORED: 1})}


def test_a_session_with_a_call_in_flight_stays_open(store: Store) -> None:
    """A call that outlasts the window must still be recorded: its session is not over yet."""
    rid = add_session(store, "talking", closes_at=NOW)
    add_session(store, "done", closes_at=NOW)
    counts = close_due_windows(store, FeedbackConfig(missing=0.0), now=NOW,
                               busy=lambda deployment, sid: (deployment, sid) == ("support", "talking"))
    assert counts == {"support": Counter({DEFAULTED: 1})}
    assert store.get_session_window("support", "talking").outcome_status == OPEN
    assert rid is not None and store.get_rollout(rid).status == RolloutStatus.RUNNING
    assert close_due_windows(store, FeedbackConfig(missing=0.0), now=NOW) == {"support": Counter({DEFAULTED: 1})}
