"""Building attempt specs from config and task records."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.runners import RunnerConfig, TaskAssets, make_attempt_spec


def test_task_assets_from_a_jsonl_record(tmp_path: Path) -> None:
    record = {
        "id": "t7",
        "input": {"question": "?"},
        "workspace": "tasks/t7/ws",
        "hidden_dir": "tasks/t7/hidden",
        "verifier_input": {"answer": "42"},
        "protected": ["tests/*.py"],
        "verifier": ["python", "check.py"],
    }
    assets = TaskAssets.from_record(record, tmp_path)
    assert assets.workspace == tmp_path / "tasks/t7/ws"
    assert assets.hidden_dir == tmp_path / "tasks/t7/hidden"
    assert assets.verifier_input == {"answer": "42"}
    assert assets.protected == ("tests/*.py",) and assets.verifier == ("python", "check.py")
    assert TaskAssets.from_record({"input": {}}) == TaskAssets()
    with pytest.raises(ValueError, match="list of arguments"):
        TaskAssets.from_record({"verifier": "python check.py"})


@pytest.mark.parametrize("bad", [0, -3, "60", True])
def test_a_records_own_timeout_must_be_positive_seconds(bad: object) -> None:
    assert TaskAssets.from_record({"timeout_s": 90}).timeout_s == 90.0
    with pytest.raises(ValueError, match="timeout_s"):
        TaskAssets.from_record({"timeout_s": bad})


def test_spec_takes_command_timeout_and_merges_protected_globs() -> None:
    config = RunnerConfig(command=["my-agent", "--fast"], timeout_s=12)
    spec = make_attempt_spec(
        config,
        rollout_id="abc",
        task_id="t",
        task_input={"x": 1},
        gateway_url="http://gw:8/",
        api_key="sk-secret",
        assets=TaskAssets(protected=("a", "b")),
        protected=["b", "c"],
        model="policy",
    )
    assert spec.command == ("my-agent", "--fast") and spec.timeout_s == 12
    assert spec.protected == ("a", "b", "c")
    assert spec.env["OPENAI_BASE_URL"] == "http://gw:8/r/abc/v1" and spec.env["HARNESSRL_MODEL"] == "policy"
    assert "sk-secret" not in repr(spec)  # keys never reach a log line through repr
