"""ATIF files from elsewhere: without token IDs (re-tokenized, marked), malformed (refused, naming file and
field), without logprobs, a Harbor job folder; and what the export never lets through (secrets)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
import trajectories.test_round_trip as samples_round_trip

from harnessrl.atif.read import AtifFormatError, import_atif, is_atif
from harnessrl.atif.write import export_atif
from harnessrl.cli import main
from harnessrl.store import Store, open_store
from harnessrl.store.base import NewCall
from harnessrl.training.config import TrainingConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, RolloutStatus, SampleFidelity

#: The samples round trip's store (tests/unit/trajectories) as a fixture here: every shape a rollout's calls take.
source = samples_round_trip.source

#: A trajectory as another producer writes it: text only, a tool call and its observation.
FOREIGN: dict[str, Any] = {
    "schema_version": "ATIF-v1.4", "session_id": "s-1",
    "agent": {"name": "terminus-2", "version": "1.0", "model_name": "other-model"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "be brief"},
        {"step_id": 2, "source": "user", "message": "capital of Quivenzan?"},
        {"step_id": 3, "source": "agent", "message": "Let me look.",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "search", "arguments": {"q": "Quivenzan"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "Shalo"}]}},
        {"step_id": 4, "source": "agent", "message": "Shalo", "metrics": {"prompt_tokens": 12}},
    ],
    "extra": {"reward": 1.0},
}


def _write(path: Path, doc: Any) -> Path:
    path.write_bytes(orjson.dumps(doc))
    return path


def _store(tmp_path: Path, name: str = "x.db") -> Store:
    return open_store(f"sqlite:///{tmp_path / name}")


def test_without_token_ids_is_retokenized_with_the_policy_template_and_marked(tmp_path: Path) -> None:
    src = _write(tmp_path / "foreign.json", FOREIGN)
    store = _store(tmp_path)
    report = import_atif(store, src, tokenizer_spec="tiny", run_id="atif")
    assert report.rollouts == 1 and report.calls == 2 and report.counts["trajectories.retokenized"] == 1
    (r,) = store.list_rollouts(run_id="atif")
    assert r.task_id == "s-1" and [(w.name, w.value) for w in store.get_rewards(r.id)] == [("final", 1.0)]
    calls = store.get_calls(r.id)
    assert all("tiny's chat template" in c.sampling["retokenized"] for c in calls)
    (sample,) = build_samples(calls, r.group_id).samples
    assert sample.fidelity == SampleFidelity.RETOKENIZED and "foreign.json" in (sample.fidelity_reason or "")
    # the tool result sits in the second turn's prompt, as context (mask 0)
    from harnessrl.models import load_tokenizer

    assert "Shalo" in load_tokenizer("tiny").decode(calls[1].prompt_token_ids)
    batch = batch_from_store(store, [r], TrainingConfig())  # RL never trusts unknown behaviour logprobs
    assert batch.samples == [] and batch.counts["excluded.retokenized_samples"] == 1


def test_without_token_ids_or_a_tokenizer_says_what_to_pass(tmp_path: Path) -> None:
    src = _write(tmp_path / "foreign.json", FOREIGN)
    with pytest.raises(AtifFormatError, match=r"foreign\.json: .*prompt_token_ids.*--tokenizer"):
        import_atif(_store(tmp_path), src)


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.update(schema_version="ATIF-v2.0"), r"schema_version is 'ATIF-v2\.0'"),
    (lambda d: d.update(schema_version="1.4"), r"schema_version is '1\.4'"),
    (lambda d: d.pop("steps"), "steps is missing"),
    (lambda d: d.update(steps=[]), "steps is empty"),
    (lambda d: d["steps"][1].update(source="robot"), r"steps\[1\]\.source"),
    (lambda d: d["steps"][2].update(step_id=7), r"steps\[2\]\.step_id is 7"),
    (lambda d: d["steps"][3].update(metrics={"completion_token_ids": ["a"]}),
     r"steps\[3\]\.metrics\.completion_token_ids\[0\]"),
    (lambda d: d["agent"].pop("version"), r"agent\.version: Field required"),
    (lambda d: d["steps"][0].update(tool_calls=[]), "tool_calls is only allowed on agent steps"),
])
def test_a_malformed_file_is_refused_naming_the_file_and_the_field(tmp_path: Path, change: Any, field: str) -> None:
    doc = copy.deepcopy(FOREIGN)
    change(doc)
    src = _write(tmp_path / "bad.json", doc)
    store = _store(tmp_path)
    with pytest.raises(AtifFormatError, match=rf"bad\.json: .*{field}"):
        import_atif(store, src, tokenizer_spec="tiny")
    assert store.list_runs() == []  # validated before anything is written
    with pytest.raises(SystemExit, match=rf"harnessrl import: .*bad\.json: .*{field}"):
        main(["import", str(src), "--into", f"sqlite:///{tmp_path / 'cli.db'}", "--tokenizer", "tiny"])


def test_not_json_names_the_file(tmp_path: Path) -> None:
    src = tmp_path / "broken.json"
    src.write_text("{not json")
    with pytest.raises(AtifFormatError, match=r"broken\.json: not JSON"):
        import_atif(_store(tmp_path), src)


def test_token_ids_without_logprobs_are_kept_and_marked(tmp_path: Path) -> None:
    doc = copy.deepcopy(FOREIGN)
    doc["steps"][2]["metrics"] = {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5],
                                  "logprobs": [-0.5, -0.25]}
    doc["steps"][3]["metrics"] = {"prompt_token_ids": [1, 2, 3, 4, 5, 6], "completion_token_ids": [7]}
    lines = tmp_path / "t.jsonl"
    lines.write_bytes(orjson.dumps(doc) + b"\n")
    assert is_atif(lines)
    store = _store(tmp_path)
    report = import_atif(store, lines, run_id="atif")
    assert report.counts["trajectories.exact"] == 1 and report.counts["steps_without_logprobs"] == 1
    (r,) = store.list_rollouts(run_id="atif")
    first, second = store.get_calls(r.id)
    assert (first.prompt_token_ids, first.completion_token_ids, first.completion_logprobs) == \
        ([1, 2, 3], [4, 5], [-0.5, -0.25])
    assert "retokenized" not in first.sampling and "without logprobs" in second.sampling["retokenized"]
    assert second.completion_token_ids == [7] and second.requested_model == "other-model"


def test_a_harbor_job_folder_takes_each_trials_verifier_reward(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for n, reward in [(1, 1.0), (2, 0.0)]:
        trial = job / f"task-a__{n}"
        (trial / "agent").mkdir(parents=True)
        _write(trial / "agent" / "trajectory.json", {**FOREIGN, "extra": None, "session_id": f"s-{n}"})
        _write(trial / "result.json", {"task_name": "task-a", "verifier_result": {"rewards": {"reward": reward}}})
    _write(job / "result.json", {"not": "a trajectory"})  # the job's own files are not trajectories
    store = _store(tmp_path)
    report = import_atif(store, job, tokenizer_spec="tiny", run_id="harbor")
    assert report.rollouts == 2
    rollouts = store.list_rollouts(run_id="harbor")
    assert {r.task_id for r in rollouts} == {"task-a"} and len({r.group_id for r in rollouts}) == 1
    assert sorted(w.value for r in rollouts for w in store.get_rewards(r.id)) == [0.0, 1.0]


def test_export_redacts_secrets_in_every_text(tmp_path: Path) -> None:
    secret = "sk-" + "A" * 30  # a default pattern
    store = _store(tmp_path)
    store.create_run("r", {}, run_id="run-1")
    r = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id="run-1")
    store.transition_rollout(r.id, RolloutStatus.RUNNING)
    store.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK,
                                {"messages": [{"role": "user", "content": f"use {secret}"}]},
                                {"choices": [{"message": {"role": "assistant", "content": f"ok {secret}"}}]},
                                [1, 2], [ChoiceTokens([3], [-0.5], "stop")], 0)])
    assert export_atif(store, tmp_path / "out") == 1
    (path,) = (tmp_path / "out").glob("*.json")
    text = path.read_text()
    assert secret not in text and "use " in text
    with pytest.raises(NotADirectoryError, match="give a folder"):
        export_atif(store, path)


def test_tokens_stored_before_token_redaction_are_scrubbed_and_untrained(tmp_path: Path) -> None:
    from harnessrl.models import load_tokenizer

    secret = "sk-" + "B" * 30
    tok = load_tokenizer("tiny")
    completion = tok("the key is " + secret, add_special_tokens=False)["input_ids"]
    store = _store(tmp_path)
    store.create_run("r", {"engine": {"model": "tiny"}}, run_id="run-1")
    r = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id="run-1")
    store.transition_rollout(r.id, RolloutStatus.RUNNING)
    store.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {"messages": [{"role": "user", "content": "k?"}]},
                                {"choices": [{"message": {"role": "assistant", "content": "[redacted]"}}]},
                                [1, 2, 3], [ChoiceTokens(completion, [-0.5] * len(completion), "stop")], 0)])
    export_atif(store, tmp_path / "out")
    (path,) = (tmp_path / "out").glob("*.json")
    step = orjson.loads(path.read_bytes())["steps"][-1]
    ids = step["metrics"]["completion_token_ids"]
    assert secret not in tok.decode(ids) and len(ids) == len(step["metrics"]["logprobs"])
    assert step["extra"]["sampling"]["redacted"]["completion"][0] > 0
    dest = _store(tmp_path, "dest.db")
    report = import_atif(dest, tmp_path / "out")
    (imported,) = dest.list_rollouts(run_id=report.run_id)
    (sample,) = build_samples(dest.get_calls(imported.id), imported.group_id).samples
    assert sample.loss_mask.count(0) > 3  # the placeholders are not trained


def test_every_shape_of_rollout_round_trips(source: Store, tmp_path: Path) -> None:
    """The samples export's fixture (merged and split samples, a failed call between trained ones, a greedy
    call, per-call policy versions and rewards, a failed rollout): the trainer reads the same after ATIF."""
    assert export_atif(source, tmp_path / "out", run_id="run-1") == 5
    dest = _store(tmp_path, "dest.db")
    report = import_atif(dest, tmp_path / "out")
    assert report.counts["trajectories.exact"] == 5
    assert samples_round_trip._view(dest, report.run_id) == samples_round_trip._view(source, "run-1")
