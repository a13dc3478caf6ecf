"""Deployments, app keys and sessions in the store, on every driver: a deployment's run, keys kept as
hashes only and revoked, a session opened once (with its running rollout when recorded), touches that
move its feedback window forward only while it is open."""

from __future__ import annotations

import threading

import pytest

from harnessrl.store import NotFound, Store
from harnessrl.store.base import AlreadyExists
from harnessrl.store.deployments import RUN_PREFIX, SessionTouch
from harnessrl.types import RolloutStatus

from ._helpers import make_call


def test_a_deployment_owns_a_run_named_after_it(store: Store) -> None:
    dep = store.create_deployment("support", {"record_fraction": 0.5})
    run = store.get_run(dep.run_id)
    assert run.name == RUN_PREFIX + "support" and run.config == {"record_fraction": 0.5}
    assert store.get_deployment("support") == dep
    with pytest.raises(AlreadyExists, match="support"):
        store.create_deployment("support", {})
    assert [r.name for r in store.list_runs()] == [RUN_PREFIX + "support"]  # the refused one left no run
    store.create_deployment("billing", {})
    assert [d.name for d in store.list_deployments()] == ["billing", "support"]
    with pytest.raises(NotFound, match="nope"):
        store.get_deployment("nope")


def test_keys_are_found_by_hash_listed_without_it_and_revoked(store: Store) -> None:
    store.create_deployment("support", {})
    store.create_deployment("billing", {})
    a = store.add_app_key("support", "hash-a", "web")
    b = store.add_app_key("support", "hash-b", "mobile")
    store.add_app_key("billing", "hash-c", "web")
    assert store.find_app_key("hash-a") == a and a.revoked_at is None and a.deployment == "support"
    assert store.find_app_key("hash-unknown") is None
    assert [k.id for k in store.list_app_keys("support")] == [a.id, b.id]
    assert not any(hasattr(k, "key_hash") for k in store.list_app_keys("support"))
    revoked = store.revoke_app_key("support", a.id)
    assert revoked.revoked_at is not None
    assert store.revoke_app_key("support", a.id).revoked_at == revoked.revoked_at  # the first time stays
    assert store.find_app_key("hash-a").revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        store.revoke_app_key("billing", b.id)  # not billing's key
    with pytest.raises(NotFound, match="nope"):
        store.add_app_key("nope", "hash-d", "x")
    with pytest.raises(Exception):  # noqa: B017, PT011 - one hash, one key (UNIQUE), whatever the driver's error
        store.add_app_key("billing", "hash-b", "again")


def test_a_recorded_session_opens_once_with_its_running_rollout(store: Store) -> None:
    dep = store.create_deployment("support", {})
    s, created = store.open_session("support", "s1", key_id="key_1", arm="stable", policy_version=3,
                                    recorded=True, window_s=60.0, rollout_key_hash="nokey")
    assert created and s.recorded and s.rollout_id and s.outcome_status == "open" and s.calls == 0
    assert s.feedback_closes_at == pytest.approx(s.last_call_at + 60.0)
    r = store.get_rollout(s.rollout_id)
    assert (r.run_id, r.task_id, r.group_id, r.status, r.policy_version) == \
        (dep.run_id, "s1", "support", RolloutStatus.RUNNING, 3)
    assert r.metadata["production"] == {"deployment": "support", "session_id": "s1", "arm": "stable"}
    assert store.rollout_key_hash(s.rollout_id) == "nokey"
    store.record_calls([make_call(s.rollout_id, [1, 2], [3])])  # its calls are recorded like any rollout's
    assert len(store.get_calls(s.rollout_id)) == 1
    again, created = store.open_session("support", "s1", key_id="key_2", arm="canary", policy_version=4,
                                        recorded=True, window_s=60.0, rollout_key_hash="nokey")
    assert not created and again == s  # the first opening wins; no second rollout
    assert len(store.list_rollouts(run_id=dep.run_id)) == 1


def test_an_unrecorded_session_has_no_rollout(store: Store) -> None:
    dep = store.create_deployment("support", {})
    s, _ = store.open_session("support", "s2", key_id="k", arm="stable", policy_version=0, recorded=False,
                              window_s=60.0, rollout_key_hash="nokey")
    assert not s.recorded and s.rollout_id is None
    assert store.list_rollouts(run_id=dep.run_id) == []
    assert store.get_session("support", "s2") == s
    with pytest.raises(NotFound, match="deployment 'nope'"):
        store.open_session("nope", "s", key_id="k", arm="stable", policy_version=0, recorded=True, window_s=1.0,
                           rollout_key_hash="x")
    with pytest.raises(NotFound, match="s9"):
        store.get_session("support", "s9")


def test_concurrent_openings_agree_on_one_session(store: Store) -> None:
    dep = store.create_deployment("support", {})
    results: list[tuple] = []

    def open_it() -> None:
        results.append(store.open_session("support", "race", key_id="k", arm="stable", policy_version=0,
                                          recorded=True, window_s=60.0, rollout_key_hash="x"))

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(created for _, created in results) == 1
    assert len({s.rollout_id for s, _ in results}) == 1
    assert len(store.list_rollouts(run_id=dep.run_id)) == 1


def test_touches_count_calls_and_move_the_window_forward_only(store: Store) -> None:
    store.create_deployment("support", {})
    s, _ = store.open_session("support", "s1", key_id="k", arm="stable", policy_version=0, recorded=False,
                              window_s=100.0, rollout_key_hash="x")
    t = s.last_call_at
    n = store.touch_sessions([SessionTouch("support", "s1", 2, t + 10), SessionTouch("support", "gone", 1, t)],
                             window_s=100.0)
    assert n == 1
    s = store.get_session("support", "s1")
    assert (s.calls, s.last_call_at, s.feedback_closes_at) == (2, pytest.approx(t + 10), pytest.approx(t + 110))
    store.touch_sessions([SessionTouch("support", "s1", 1, t + 5)], window_s=100.0)  # late, older touch
    s = store.get_session("support", "s1")
    assert (s.calls, s.last_call_at, s.feedback_closes_at) == (3, pytest.approx(t + 10), pytest.approx(t + 110))


def test_sessions_are_listed_oldest_first_and_filtered(store: Store) -> None:
    store.create_deployment("support", {})
    store.create_deployment("billing", {})
    for i, recorded in enumerate([True, False, True]):
        store.open_session("support", f"s{i}", key_id="k", arm="stable", policy_version=0, recorded=recorded,
                           window_s=1.0, rollout_key_hash="x")
    store.open_session("billing", "b0", key_id="k", arm="stable", policy_version=0, recorded=True, window_s=1.0,
                       rollout_key_hash="x")
    assert [s.id for s in store.list_sessions("support")] == ["s0", "s1", "s2"]
    assert [s.id for s in store.list_sessions("support", recorded=True)] == ["s0", "s2"]
    assert [s.id for s in store.list_sessions("support", limit=1, offset=1)] == ["s1"]
