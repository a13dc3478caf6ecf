"""Canary decisions in the store, on every driver: numbering per deployment, the serving state read back
from the newest decision (and after reopening), per-arm statistics of decided sessions since a time."""

from __future__ import annotations

import time

import pytest

from harnessrl.production.canary_state import canary_state
from harnessrl.store import NotFound, Store, open_store
from harnessrl.store.canary import CanaryDecision


def _deployment(store: Store, name: str) -> None:
    run = store.create_run(f"production:{name}", {})
    with store._write() as conn:  # type: ignore[attr-defined]  # deployments.py (helper A) writes these
        p = store.P  # type: ignore[attr-defined]
        conn.execute(f"INSERT INTO deployments (name, run_id, config, created_at) VALUES ({p}, {p}, {p}, {p})",
                     (name, run.id, "{}", time.time()))


def _session(store: Store, dep: str, sid: str, arm: str, version: int, outcome: float | None = None,
             status: str = "open", created_at: float | None = None) -> None:
    now = time.time() if created_at is None else created_at
    p = store.P  # type: ignore[attr-defined]
    with store._write() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO sessions (deployment, id, rollout_id, key_id, arm, policy_version, recorded, calls,"
            " created_at, last_call_at, feedback_closes_at, outcome, outcome_status, trained_version)"
            f" VALUES ({', '.join([p] * 14)})",
            (dep, sid, None, "k", arm, version, 0, 1, now, now, now + 60, outcome, status, None))


def _decision(dep: str, action: str, stable_version: int, candidate_version: int | None, fraction: float = 0.2,
              **weights: str | None) -> CanaryDecision:
    return CanaryDecision(dep, action, stable_version, candidate_version, fraction, {"arms": [], "weights": weights},
                          f"because {action}")


def test_decisions_are_numbered_per_deployment_and_read_back(store: Store) -> None:
    _deployment(store, "a")
    _deployment(store, "b")
    first = store.add_canary_decision(_decision("a", "start", 0, 1, candidate="/ckpt/v1"))
    assert (first.index, first.action) == (0, "start") and first.created_at > 0
    assert store.add_canary_decision(_decision("b", "start", 3, 4)).index == 0
    store.add_canary_decision(_decision("a", "hold", 0, 1))
    store.add_canary_decision(_decision("a", "promote", 0, 1, candidate="/ckpt/v1"))
    got = store.canary_decisions("a")
    assert [(d.index, d.action, d.stable_version, d.candidate_version) for d in got] == [
        (0, "start", 0, 1), (1, "hold", 0, 1), (2, "promote", 0, 1)]
    assert got[0].stats == {"arms": [], "weights": {"candidate": "/ckpt/v1"}} and got[0].reason == "because start"
    assert [d.index for d in store.canary_decisions("a", limit=2)] == [1, 2]
    assert store.canary_decisions("nobody") == []


def test_unknown_deployment_and_action_are_refused(store: Store) -> None:
    with pytest.raises(NotFound, match="deployment 'ghost'"):
        store.add_canary_decision(_decision("ghost", "start", 0, 1))
    _deployment(store, "a")
    with pytest.raises(ValueError, match="not one of"):
        store.add_canary_decision(_decision("a", "maybe", 0, 1))
    assert store.canary_decisions("a") == []


def test_state_follows_the_newest_decision(store: Store) -> None:
    _deployment(store, "a")
    assert canary_state(store, "a").stable_version is None and not canary_state(store, "a").running
    start = store.add_canary_decision(_decision("a", "start", 0, 1, 0.25, stable=None, candidate="/c/v1"))
    store.add_canary_decision(_decision("a", "hold", 0, 1, 0.25, stable=None, candidate="/c/v1"))
    s = canary_state(store, "a")
    assert (s.stable_version, s.candidate_version, s.fraction, s.running) == (0, 1, 0.25, True)
    assert s.started_at == start.created_at  # the start, not the newest hold: statistics count from there
    assert s.weights == {"stable": None, "candidate": "/c/v1"}
    store.add_canary_decision(_decision("a", "promote", 0, 1, 0.25, stable=None, candidate="/c/v1"))
    s = canary_state(store, "a")
    assert (s.stable_version, s.candidate_version, s.fraction, s.running) == (1, None, 0.0, False)
    assert s.weights == {"stable": "/c/v1", "stable_model": None} and s.last is not None
    assert s.last.action == "promote"
    w = {"stable": "/c/v1", "stable_model": "a-v1", "candidate": "/c/v2", "candidate_model": "a-v2"}
    store.add_canary_decision(_decision("a", "start", 1, 2, 0.1, **w))
    store.add_canary_decision(_decision("a", "rollback", 1, 2, 0.1, **w))
    s = canary_state(store, "a")
    assert (s.stable_version, s.candidate_version, s.running) == (1, None, False)
    assert s.weights == {"stable": "/c/v1", "stable_model": "a-v1"}
    store.add_canary_decision(_decision("a", "start", 1, 3, 0.1, **(w | {"candidate_model": "a-v3"})))
    store.add_canary_decision(_decision("a", "promote", 1, 3, 0.1, **(w | {"candidate_model": "a-v3"})))
    assert canary_state(store, "a").weights == {"stable": "/c/v2", "stable_model": "a-v3"}


def test_state_survives_reopening(store_url: str) -> None:
    store = open_store(store_url)
    _deployment(store, "a")
    store.add_canary_decision(_decision("a", "start", 2, 3, 0.3, candidate="/c/v3"))
    store.close()
    again = open_store(store_url)
    try:
        s = canary_state(again, "a")
        assert (s.stable_version, s.candidate_version, s.fraction, s.weights["candidate"]) == (2, 3, 0.3, "/c/v3")
    finally:
        again.close()


def test_arm_stats_count_decided_sessions_since_a_time(store: Store) -> None:
    _deployment(store, "a")
    _deployment(store, "b")
    t0 = time.time()
    _session(store, "a", "old", "stable", 0, 0.0, "scored", created_at=t0 - 100)  # before the canary: left out
    for i, (outcome, status) in enumerate([(1.0, "scored"), (0.0, "scored"), (0.5, "defaulted"),
                                           (None, "open"), (None, "dropped")]):
        _session(store, "a", f"s{i}", "stable", 0, outcome, status, created_at=t0 + i)
    _session(store, "a", "c0", "canary", 1, 1.0, "scored", created_at=t0)
    _session(store, "a", "c1", "canary", 1, None, "open", created_at=t0)
    _session(store, "a", "w", "canary", 9, 0.0, "scored", created_at=t0)  # another candidate's session
    _session(store, "b", "x", "stable", 0, 0.0, "scored", created_at=t0)  # another deployment
    stats = {(s.arm, s.version): s for s in store.arm_stats("a", t0)}
    assert set(stats) == {("stable", 0), ("canary", 1), ("canary", 9)}
    st = stats["stable", 0]
    assert (st.sessions, st.decided) == (5, 3) and st.mean == pytest.approx(0.5)
    c = stats["canary", 1]
    assert (c.sessions, c.decided, c.mean) == (2, 1, 1.0)
    assert store.arm_stats("a", t0 + 1000) == []
    assert stats["canary", 9].as_dict() == {"arm": "canary", "version": 9, "sessions": 1, "decided": 1, "mean": 0.0,
                                            "mean_sq": 0.0}
    assert st.mean_sq == pytest.approx((1.0 + 0.0 + 0.25) / 3)  # the confidence rule's spread


def test_expected_index_refuses_a_stale_writer(store: Store) -> None:
    from harnessrl.store.canary import CanaryConflict

    _deployment(store, "a")
    assert store.add_canary_decision(_decision("a", "start", 0, 1), expected_index=0).index == 0
    store.add_canary_decision(_decision("a", "promote", 0, 1), expected_index=1)  # gateway one decides
    with pytest.raises(CanaryConflict, match="next index 2, expected 1"):  # gateway two still saw index 0
        store.add_canary_decision(_decision("a", "promote", 0, 1), expected_index=1)
    assert [d.action for d in store.canary_decisions("a")] == ["start", "promote"]
