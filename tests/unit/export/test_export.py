"""``harnessrl export``: one record per sample, token-aligned, loadable with ``datasets``, redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.cli import main
from harnessrl.export import export, sample_records
from harnessrl.store import NotFound, Store, open_store
from harnessrl.store.base import NewCall
from harnessrl.training.samples import build_samples
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus

SECRET = "sk-" + "A" * 30  # a default pattern: redacted even if the store kept it
CUSTOM = "internal-hostname-42"  # only the run's own pattern covers this


def _call(rid: str, prompt: list[int], completion: list[int], text: str, status: CallStatus = CallStatus.OK) -> NewCall:
    return NewCall(rid, ApiKind.CHAT, status, {"messages": [{"role": "user", "content": text}]},
                   {"choices": [{"message": {"role": "assistant", "content": f"reply {text}"}}]},
                   prompt, [ChoiceTokens(completion, [-0.25 * (k + 1) for k in range(len(completion))], "stop")], 3)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    run = s.create_run("r", {"gateway": {"redact_patterns": [CUSTOM]}}, run_id="run-1")
    other = s.create_run("o", {}, run_id="run-2")
    for i, (run_id, outcome) in enumerate([(run.id, "ok"), (run.id, "split"), (run.id, "failed"),
                                            (other.id, "ok"), (run.id, "no-calls")]):
        r = s.create_rollout(task_id=f"t{i}", input={}, group_id=f"g{i}", api_key_hash="h", run_id=run_id, step=1,
                             metadata={"split": "train"}, rollout_id=f"r{i}")
        s.transition_rollout(r.id, RolloutStatus.RUNNING)
        if outcome != "no-calls":
            s.record_calls([_call(r.id, [1, 2, 3], [4, 5], f"first {SECRET} {CUSTOM}")])
            s.record_calls([_call(r.id, [1, 2, 3, 4, 5, 6], [7], f"second, after {SECRET} {CUSTOM}")])
        if outcome == "split":
            s.record_calls([_call(r.id, [9, 9], [8, 8, 8], "rewritten")])
        s.add_reward(r.id, 0.1 * i, "final")
        if outcome == "failed":
            s.transition_rollout(r.id, RolloutStatus.FAILED, failure_kind=FailureKind.AGENT)
        else:
            s.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    return s


def test_records_are_the_training_samples(store: Store) -> None:
    recs = list(sample_records(store, run_id="run-1"))
    assert [(r["rollout_id"], r["sample_index"]) for r in recs] == [("r0", 0), ("r1", 0), ("r1", 1), ("r2", 0)]
    for rec in recs:
        expected = build_samples(store.get_calls(rec["rollout_id"]), rec["group_id"]).samples[rec["sample_index"]]
        assert rec["token_ids"] == expected.token_ids
        assert rec["loss_mask"] == expected.loss_mask
        assert rec["behaviour_logprobs"] == expected.behaviour_logprobs
        assert len(rec["token_ids"]) == len(rec["loss_mask"]) == len(rec["behaviour_logprobs"])
        assert rec["reward"] == pytest.approx([w.value for w in store.get_rewards(rec["rollout_id"])][-1])
    assert recs[0]["token_ids"] == [1, 2, 3, 4, 5, 6, 7] and recs[0]["loss_mask"] == [0, 0, 0, 1, 1, 0, 1]
    assert recs[0]["fidelity"] == "merged" and recs[2]["fidelity"] == "split"
    assert recs[3]["status"] == "failed" and recs[3]["failure_kind"] == "agent"
    assert [r["rollout_id"] for r in sample_records(store, status=RolloutStatus.FAILED)] == ["r2"]
    with pytest.raises(NotFound):
        list(sample_records(store, run_id="nope"))


# What the export must hold, written out by hand (not derived from ``sample_records``): each sample's last
# call with the default pattern (SECRET) and run-1's own pattern (CUSTOM) replaced, nothing else touched.
MERGED = ([1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 1, 1, 0, 1], [0.0, 0.0, 0.0, -0.25, -0.5, 0.0, -0.25])
REWRITTEN = ([9, 9, 8, 8, 8], [0, 0, 1, 1, 1], [0.0, 0.0, -0.25, -0.5, -0.75])
SECOND_REQUEST = '{"messages":[{"role":"user","content":"second, after [REDACTED] [REDACTED]"}]}'
SECOND_RESPONSE = ('{"choices":[{"message":{"role":"assistant",'
                   '"content":"reply second, after [REDACTED] [REDACTED]"}}]}')
REWRITTEN_REQUEST = '{"messages":[{"role":"user","content":"rewritten"}]}'
REWRITTEN_RESPONSE = '{"choices":[{"message":{"role":"assistant","content":"reply rewritten"}}]}'


def _rows(ds) -> list[tuple]:
    return [(r["rollout_id"], r["token_ids"], r["loss_mask"], [round(x, 6) for x in r["behaviour_logprobs"]],
             r["request"], r["response"]) for r in ds]


def test_parquet_loads_with_datasets_and_is_redacted(store: Store, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "samples.parquet"
    n = export(store, out, "parquet", batch_rows=2)  # several row groups
    ds = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert n == len(ds) == 5
    second = (SECOND_REQUEST, SECOND_RESPONSE)
    assert _rows(ds) == [("r0", *MERGED, *second), ("r1", *MERGED, *second),
                         ("r1", *REWRITTEN, REWRITTEN_REQUEST, REWRITTEN_RESPONSE),
                         ("r2", *MERGED, *second),
                         ("r3", *MERGED, *second)]  # run-2's rows too: an export of all runs takes every pattern
    assert ds[0]["rewards"] == [{"name": "final", "value": 0.0, "call_index": None}]
    # One run alone: still that run's own pattern, not only the defaults.
    one = tmp_path / "run-1.parquet"
    assert export(store, one, "parquet", run_id="run-1") == 4
    ds1 = datasets.load_dataset("parquet", data_files=str(one), split="train")
    assert [(r["rollout_id"], r["request"], r["response"]) for r in ds1] == [
        ("r0", *second), ("r1", *second), ("r1", REWRITTEN_REQUEST, REWRITTEN_RESPONSE), ("r2", *second)]


def test_jsonl_via_the_cli_with_an_extra_pattern(store: Store, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    out = tmp_path / "s.jsonl"
    assert main(["export", "--db", db, "--format", "jsonl", "--out", str(out), "--run", "run-2",
                 "--redact", "second"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["rollout_id"] for x in lines] == ["r3"]
    assert "second" not in lines[0]["request"] and SECRET not in lines[0]["request"]
    assert CUSTOM in lines[0]["request"]  # run-2 does not configure that pattern
    assert "exported 1 samples" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="does not exist"):
        main(["export", "--db", db, "--format", "jsonl", "--out", str(out), "--run", "nope"])
