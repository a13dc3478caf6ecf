"""After Ctrl-C, the run's attempts still queued or running are closed as infra failures, others untouched."""

from __future__ import annotations

from pathlib import Path

from harnessrl.drivers.lifecycle import close_interrupted
from harnessrl.store import open_store
from harnessrl.types import FailureKind, RolloutStatus


def test_only_the_runs_unfinished_attempts_are_closed_as_infra(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    run, other = store.create_run("r", {}), store.create_run("o", {})

    def rollout(run_id: str, *path: RolloutStatus) -> str:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run_id).id
        for status in path:
            store.transition_rollout(rid, status)
        return rid

    queued, running = rollout(run.id), rollout(run.id, RolloutStatus.RUNNING)
    done = rollout(run.id, RolloutStatus.RUNNING, RolloutStatus.SUCCEEDED)
    elsewhere = rollout(other.id, RolloutStatus.RUNNING)
    assert close_interrupted(store, run.id) == 2
    for rid in (queued, running):
        r = store.get_rollout(rid)
        assert r.status is RolloutStatus.FAILED and r.failure_kind is FailureKind.INFRA
        assert "interrupted" in (r.error or "")
    assert store.get_rollout(done).status is RolloutStatus.SUCCEEDED
    assert store.get_rollout(elsewhere).status is RolloutStatus.RUNNING
    assert close_interrupted(store, run.id) == 0
    store.close()
