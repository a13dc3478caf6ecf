"""Rollouts: creation, the state machine the store enforces, timestamps, paging and filters."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from harnessrl.store import IllegalTransition, NotFound, Store
from harnessrl.store.base import AlreadyExists
from harnessrl.types import ROLLOUT_TRANSITIONS, FailureKind, RolloutStatus

S = RolloutStatus
LEGAL = [(a, b) for a, targets in ROLLOUT_TRANSITIONS.items() for b in targets]
ILLEGAL = [(a, b) for a, b in itertools.product(S, S) if (a, b) not in LEGAL]
# How to reach each status from queued (legal path).
PATH = {
    S.QUEUED: [],
    S.RUNNING: [S.RUNNING],
    S.SUCCEEDED: [S.RUNNING, S.SUCCEEDED],
    S.FAILED: [S.FAILED],
    S.TIMED_OUT: [S.RUNNING, S.TIMED_OUT],
    S.CANCELLED: [S.CANCELLED],
}


def _kind(status: RolloutStatus) -> FailureKind | None:
    return FailureKind.AGENT if status in (S.FAILED, S.TIMED_OUT) else None


def _drive(store: Store, rollout_id: str, status: RolloutStatus) -> None:
    for step in PATH[status]:
        store.transition_rollout(rollout_id, step, failure_kind=_kind(step))


def test_create_and_read(store: Store) -> None:
    run = store.create_run("r", {})
    r = store.create_rollout(
        task_id="t1", input={"prompt": "x"}, group_id="g1", api_key_hash="sha256:abc", policy_version=3,
        run_id=run.id, step=7, metadata={"harness": "codex"},
    )  # fmt: skip
    assert r.status is S.QUEUED and r.started_at is None and r.finished_at is None
    assert store.get_rollout(r.id) == r
    assert (r.run_id, r.task_id, r.group_id, r.policy_version, r.step) == (run.id, "t1", "g1", 3, 7)
    assert r.input == {"prompt": "x"} and r.metadata == {"harness": "codex"}
    assert store.rollout_key_hash(r.id) == "sha256:abc"


def test_rollout_without_run_and_errors(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout(rollout_id="mine")
    assert rid == "mine" and store.get_rollout(rid).run_id is None
    with pytest.raises(AlreadyExists):
        new_rollout(rollout_id="mine")
    with pytest.raises(NotFound):
        new_rollout(run_id="no-such-run")
    for read in (store.get_rollout, store.rollout_key_hash, store.get_calls, store.get_rewards):
        with pytest.raises(NotFound):
            read("missing")
    with pytest.raises(NotFound):
        store.transition_rollout("missing", S.RUNNING)


@pytest.mark.parametrize(("src", "dst"), LEGAL, ids=[f"{a}->{b}" for a, b in LEGAL])
def test_legal_transitions(store: Store, new_rollout: Callable[..., str], src: S, dst: S) -> None:
    rid = new_rollout()
    _drive(store, rid, src)
    r = store.transition_rollout(rid, dst, failure_kind=_kind(dst), error="e" if dst is S.FAILED else None)
    assert r.status is dst and store.get_rollout(rid) == r
    assert (r.started_at is not None) == (S.RUNNING in [*PATH[src], dst])
    assert (r.finished_at is not None) == dst.terminal
    if r.started_at is not None and r.finished_at is not None:
        assert r.created_at <= r.started_at <= r.finished_at
    assert r.failure_kind is _kind(dst)


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=[f"{a}->{b}" for a, b in ILLEGAL])
def test_illegal_transitions(store: Store, new_rollout: Callable[..., str], src: S, dst: S) -> None:
    rid = new_rollout()
    _drive(store, rid, src)
    before = store.get_rollout(rid)
    with pytest.raises(IllegalTransition, match=f"{src} -> {dst}"):
        store.transition_rollout(rid, dst, failure_kind=_kind(dst))
    assert store.get_rollout(rid) == before


def test_failure_details_are_kept(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    store.transition_rollout(rid, S.RUNNING, runner_handle="pid:42")
    r = store.transition_rollout(
        rid, S.FAILED, failure_kind=FailureKind.INFRA, error="OOM", exit_code=137, logs="…"
    )
    assert (r.failure_kind, r.error, r.exit_code, r.logs, r.runner_handle) == (
        FailureKind.INFRA, "OOM", 137, "…", "pid:42",
    )  # fmt: skip


def test_failure_kind_is_required_where_it_decides_training(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    rid = new_rollout()
    store.transition_rollout(rid, S.RUNNING)
    for status in (S.FAILED, S.TIMED_OUT):
        with pytest.raises(ValueError, match="failure_kind"):
            store.transition_rollout(rid, status)
    with pytest.raises(ValueError, match="failure_kind"):
        store.transition_rollout(rid, S.SUCCEEDED, failure_kind=FailureKind.AGENT)
    assert store.get_rollout(rid).status is S.RUNNING
    r = store.transition_rollout(rid, S.TIMED_OUT, failure_kind=FailureKind.INFRA)
    assert r.failure_kind is FailureKind.INFRA


def test_paging_is_in_creation_order(store: Store, new_rollout: Callable[..., str]) -> None:
    ids = [new_rollout() for _ in range(25)]
    pages = [store.list_rollouts(limit=10, offset=o) for o in (0, 10, 20, 30)]
    assert [len(p) for p in pages] == [10, 10, 5, 0]
    assert [r.id for p in pages for r in p] == ids
    assert store.list_rollouts(limit=0) == []
    with pytest.raises(ValueError):
        store.list_rollouts(offset=-1)


@pytest.mark.parametrize("n", [0, 7, 20, 21])  # none, under a page, whole pages, one past
def test_iter_rollouts_reads_every_page_once(store: Store, new_rollout: Callable[..., str], n: int) -> None:
    ids = [new_rollout() for _ in range(n)]
    assert [r.id for r in store.iter_rollouts(page=7)] == ids
    for rid in ids[-1:]:
        store.transition_rollout(rid, S.RUNNING)
    running = [r.id for r in store.iter_rollouts(page=7, status=S.RUNNING)]  # filters pass through
    assert running == ids[-1:]


def test_filters(store: Store, new_rollout: Callable[..., str]) -> None:
    a, b = store.create_run("a", {}).id, store.create_run("b", {}).id
    made = {
        (run, step, i): new_rollout(run_id=run, step=step)
        for run in (a, b)
        for step in (0, 1)
        for i in range(3)
    }
    made["free"] = new_rollout()
    running = [made[(a, 1, 0)], made[(b, 0, 2)]]
    for rid in running:
        store.transition_rollout(rid, S.RUNNING)

    def ids(**kw: object) -> list[str]:
        return [r.id for r in store.list_rollouts(**kw)]  # type: ignore[arg-type]

    assert ids(run_id=a) == [v for k, v in made.items() if k[0] == a]
    assert ids(run_id=b, step=0) == [made[(b, 0, i)] for i in range(3)]
    assert ids(step=1) == [v for k, v in made.items() if k != "free" and k[1] == 1]
    assert ids(status=S.RUNNING) == running
    assert ids(status=S.RUNNING, run_id=a) == running[:1]
    assert ids(status=S.RUNNING, run_id=b, step=1) == []
    assert ids(run_id=a, step=0, limit=2, offset=1) == [made[(a, 0, 1)], made[(a, 0, 2)]]
    assert len(ids(status=S.QUEUED)) == 11
