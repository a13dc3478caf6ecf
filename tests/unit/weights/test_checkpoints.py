"""Checkpoint folders are named and found by one module; policy versions are recorded by one function."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.store import open_store
from harnessrl.weights.checkpoints import (
    checkpoint_dir,
    checkpoint_step,
    latest_checkpoint,
    save_checkpoint_atomic,
)
from harnessrl.weights.versions import record_policy_version


class _Trainer:
    def save_checkpoint(self, path: Path) -> Path:
        path.mkdir(parents=True)
        (path / "trainer_state.json").write_text("{}")
        return path


def test_names_round_trip_and_the_newest_complete_folder_wins(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None and checkpoint_step(None) == 0
    for step in (2, 10, 9):
        assert checkpoint_step(save_checkpoint_atomic(_Trainer(), tmp_path, step)) == step
    assert checkpoint_dir(tmp_path, 10) == tmp_path / "checkpoints" / "step_000010"
    (tmp_path / "checkpoints" / "step_000011.tmp").mkdir()  # a save killed before its rename
    (tmp_path / "checkpoints" / "notes").mkdir()
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 10)
    checkpoint_dir(tmp_path, 1_000_000).mkdir()  # past six digits, still the newest (by number, not name)
    assert checkpoint_step(latest_checkpoint(tmp_path)) == 1_000_000


def test_a_folder_of_another_name_is_refused_not_read_as_step_0() -> None:
    with pytest.raises(ValueError, match="step_000012"):
        checkpoint_step(Path("/runs/r/checkpoints/final"))


def test_a_leftover_tmp_folder_is_replaced(tmp_path: Path) -> None:
    stale = checkpoint_dir(tmp_path, 3).with_name("step_000003.tmp")
    (stale / "junk").mkdir(parents=True)
    done = save_checkpoint_atomic(_Trainer(), tmp_path, 3)
    assert sorted(p.name for p in done.iterdir()) == ["trainer_state.json"] and not stale.exists()


def test_recording_a_version_twice_keeps_the_first_row(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    run = store.create_run("r", {})
    assert record_policy_version(store, 1, tmp_path / "a", run_id=run.id, step=1)
    assert not record_policy_version(store, 1, tmp_path / "b", run_id=run.id, step=1)  # a resumed run
    (row,) = store.list_policy_versions(run.id)
    assert (row.version, row.checkpoint_path, row.metadata) == (1, str(tmp_path / "a"), {"step": 1})
    store.close()


def test_pruning_keeps_the_newest_checkpoints_and_versions(tmp_path: Path) -> None:
    from harnessrl.weights.checkpoints import prune_checkpoints
    from harnessrl.weights.publish import prune_published

    for step in (1, 2, 3, 10):
        save_checkpoint_atomic(_Trainer(), tmp_path, step)
    (tmp_path / "checkpoints" / "step_000011.tmp").mkdir()  # a save in progress is not a checkpoint to prune
    gone = prune_checkpoints(tmp_path, 2)
    assert [p.name for p in gone] == ["step_000001", "step_000002"]  # by number, oldest first
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000003", "step_000010",
                                                                           "step_000011.tmp"]
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 10)
    policies = tmp_path / "policies"
    for name in ("v000001", "v000002", "v000012", "notes"):
        (policies / name).mkdir(parents=True)
    assert [p.name for p in prune_published(policies, 1)] == ["v000001", "v000002"]
    assert sorted(p.name for p in policies.iterdir()) == ["notes", "v000012"]
    assert prune_checkpoints(tmp_path / "elsewhere", 1) == [] and prune_published(tmp_path / "none", 1) == []
    with pytest.raises(ValueError, match="at least 1"):
        prune_checkpoints(tmp_path, 0)


def test_keep_checkpoints_is_refused_where_a_rollback_reads_old_versions() -> None:
    from pydantic import ValidationError

    from harnessrl.config import RunConfig

    assert RunConfig(keep_checkpoints=2).keep_checkpoints == 2
    with pytest.raises(ValidationError, match="rolls a canary back"):
        RunConfig(keep_checkpoints=2, source="production", deployment="d")
    with pytest.raises(ValidationError):
        RunConfig(keep_checkpoints=0)
