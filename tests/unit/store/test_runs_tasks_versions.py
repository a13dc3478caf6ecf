"""Runs, tasks and policy versions: create, read back, list, and the errors a caller can hit."""

from __future__ import annotations

import pytest

from harnessrl.store import NotFound, Store
from harnessrl.store.base import AlreadyExists
from harnessrl.types import Task, TaskSplit


def test_run_round_trip(store: Store) -> None:
    run = store.create_run("demo", {"lr": 1e-5, "nested": {"k": [1, 2]}})
    assert store.get_run(run.id) == run
    named = store.create_run("second", {}, run_id="run-2")
    assert named.id == "run-2"
    assert [r.id for r in store.list_runs()] == [run.id, "run-2"]


def test_run_errors(store: Store) -> None:
    store.create_run("a", {}, run_id="r")
    with pytest.raises(AlreadyExists):
        store.create_run("b", {}, run_id="r")
    with pytest.raises(NotFound):
        store.get_run("missing")
    assert store.get_run("r").name == "a"


def test_tasks_upsert_keeps_order_and_updates(store: Store) -> None:
    run = store.create_run("demo", {})
    tasks = [
        Task(run.id, f"t{i}", {"q": i}, TaskSplit.EVAL if i % 3 == 0 else TaskSplit.TRAIN) for i in range(6)
    ]
    store.upsert_tasks(run.id, tasks[:4])
    store.upsert_tasks(run.id, [Task(run.id, "t1", {"q": "changed"}, TaskSplit.EVAL), *tasks[4:]])
    listed = store.list_tasks(run.id)
    assert [t.id for t in listed] == [f"t{i}" for i in range(6)]
    assert listed[1] == Task(run.id, "t1", {"q": "changed"}, TaskSplit.EVAL)
    assert [t.id for t in store.list_tasks(run.id, TaskSplit.EVAL)] == ["t0", "t1", "t3"]
    assert [t.id for t in store.list_tasks(run.id, TaskSplit.TRAIN)] == ["t2", "t4", "t5"]


def test_tasks_of_other_runs_are_separate(store: Store) -> None:
    a, b = store.create_run("a", {}), store.create_run("b", {})
    store.upsert_tasks(a.id, [Task(a.id, "same", {"run": "a"})])
    store.upsert_tasks(b.id, [Task(b.id, "same", {"run": "b"})])
    assert store.list_tasks(a.id)[0].input == {"run": "a"}
    assert store.list_tasks(b.id)[0].input == {"run": "b"}


def test_task_errors(store: Store) -> None:
    run = store.create_run("a", {})
    with pytest.raises(NotFound):
        store.upsert_tasks("missing", [Task("missing", "t", {})])
    with pytest.raises(NotFound):
        store.list_tasks("missing")
    with pytest.raises(ValueError, match="belongs to run"):
        store.upsert_tasks(run.id, [Task("other", "t", {})])
    assert store.list_tasks(run.id) == []


def test_policy_versions(store: Store) -> None:
    run = store.create_run("a", {})
    v0 = store.add_policy_version(0, None, run_id=run.id)
    v1 = store.add_policy_version(1, "/ckpt/1", run_id=run.id, metadata={"loss": 0.5})
    free = store.add_policy_version(0, "/ckpt/free")  # the gateway may publish without a run
    assert store.list_policy_versions(run.id) == [v0, v1]
    assert v1.metadata == {"loss": 0.5} and v1.checkpoint_path == "/ckpt/1"
    assert free in store.list_policy_versions() and len(store.list_policy_versions()) == 3
    with pytest.raises(AlreadyExists):
        store.add_policy_version(1, None, run_id=run.id)
    with pytest.raises(AlreadyExists):
        store.add_policy_version(0, None)
    with pytest.raises(NotFound):
        store.add_policy_version(2, None, run_id="missing")
