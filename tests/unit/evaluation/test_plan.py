"""What a rerun of ``harnessrl eval`` runs: only missing attempts and bounded infra reruns (issue 52)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.evaluation.plan import (
    Checkpoint,
    EvalChanged,
    changes,
    fingerprint,
    open_manifest,
    resolve_checkpoint,
    still_needed,
)

from ._attempts import attempt


@pytest.mark.parametrize(("done", "retries", "needed"), [
    ([], 2, 4),
    (["ok", "ok"], 2, 2),
    (["ok"] * 4, 2, 0),
    (["ok", "fail", "ok", "fail"], 2, 0),  # a task failure is a result: never rerun
    (["ok", "ok", "ok", "infra"], 2, 1),
    (["ok", "ok", "ok", "infra", "infra"], 2, 1),
    (["ok", "ok", "ok", "infra", "infra", "infra"], 2, 0),  # the bound: the task stays at 3 scored
    (["infra"] * 6, 2, 0),  # unscored, never retried past the bound
    (["infra", "infra"], 0, 2),  # no retries: the cap is the 4 launches
    (["running", "ok"], 2, 3),  # left running by a killed eval: counted as infra
    (["interrupted"] * 4 + ["ok"], 0, 3),  # stopped by the eval's own stop: replaced outside the bound
    (["interrupted"] * 9 + ["infra", "infra", "infra"], 2, 3),  # 3 of the 6 counted launches left
])
def test_a_rerun_launches_only_what_is_missing_within_the_infra_bound(done: list[str], retries: int,
                                                                      needed: int) -> None:
    assert still_needed([attempt(k) for k in done], wanted=4, infra_retries=retries) == needed


def _print(tasks: dict[str, object], attempts: int = 4) -> dict[str, object]:
    return fingerprint(tasks=tasks, checkpoints=[Checkpoint("base", None)], harnesses={"h": {"command": ["x"]}},
                       settings={"attempts": attempts})


def test_the_same_eval_resumes_and_a_changed_one_is_refused_naming_what_changed(tmp_path: Path) -> None:
    first = _print({"a": {"q": 1}, "b": {"q": 2}})
    run_id = open_manifest(tmp_path, first, "eval-1")
    assert run_id == "eval-1" and json.loads((tmp_path / "eval.json").read_text())["run_id"] == "eval-1"
    assert open_manifest(tmp_path, _print({"a": {"q": 1}, "b": {"q": 2}}), "eval-2") == "eval-1"
    changed = _print({"a": {"q": 1}, "b": {"q": 3}, "c": {"q": 4}}, attempts=8)
    assert changes(first, changed) == ["tasks added: c", "tasks changed: b", "settings changed: attempts"]
    with pytest.raises(EvalChanged, match="tasks added: c; tasks changed: b; settings changed: attempts"):
        open_manifest(tmp_path, changed, "eval-3")


def test_checkpoints_resolve_from_a_folder_a_run_directory_or_base(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "demo"
    for step in (2, 10):
        (run / "checkpoints" / f"step_{step}").mkdir(parents=True)
        (run / "checkpoints" / f"step_{step}" / "adapter.bin").write_bytes(b"w" * step)
    assert resolve_checkpoint("base", tmp_path) == Checkpoint("base", None)
    assert resolve_checkpoint("runs/demo", tmp_path) == Checkpoint("demo/step_10", run / "checkpoints" / "step_10")
    assert resolve_checkpoint(str(run / "checkpoints" / "step_2"), Path("/")).label == "demo/step_2"
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_checkpoint("runs/none", tmp_path)
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no trained step"):
        resolve_checkpoint("empty", tmp_path)


def test_a_retrained_checkpoint_folder_is_a_different_eval(tmp_path: Path) -> None:
    folder = tmp_path / "step_1"
    folder.mkdir()
    (folder / "trainer_state.json").write_text('{"step": 1}')
    before = fingerprint(tasks={}, checkpoints=[Checkpoint("c", folder)], harnesses={}, settings={})
    (folder / "trainer_state.json").write_text('{"step": 1, "again": true}')
    after = fingerprint(tasks={}, checkpoints=[Checkpoint("c", folder)], harnesses={}, settings={})
    assert changes(before, after) == ["checkpoints changed: c"]
