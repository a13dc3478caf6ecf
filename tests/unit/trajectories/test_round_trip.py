"""export -> import -> the same samples: token IDs, loss masks, behaviour logprobs, temperatures, rewards."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harnessrl.cli import main
from harnessrl.export import FORMAT_VERSION, export
from harnessrl.importer import ImportFormatError, import_file
from harnessrl.store import Store, open_store
from harnessrl.store.base import NewCall
from harnessrl.training.samples import build_samples
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus


def _call(rid: str, prompt: list[int], completion: list[int], *, temperature: float | None = None,
          status: CallStatus = CallStatus.OK, version: int = 2) -> NewCall:
    sampling = {} if temperature is None else {"temperature": temperature}
    lp = [-0.1 - 0.37 * k for k in range(len(completion))]  # not round in float32
    return NewCall(rid, ApiKind.CHAT, status, {"messages": [{"role": "user", "content": "q"}]}, None, prompt,
                   [ChoiceTokens(completion, lp, "stop")], version, sampling=sampling)


@pytest.fixture
def source(tmp_path: Path) -> Store:
    s = open_store(f"sqlite:///{tmp_path / 'src.db'}")
    s.create_run("r", {}, run_id="run-1")
    shapes = ["merged", "split", "failed", "error-call", "greedy-mixed"]
    for i, shape in enumerate(shapes):
        r = s.create_rollout(task_id=f"t{i % 2}", input={}, group_id=f"g{i % 2}", api_key_hash="h", run_id="run-1",
                             step=i + 1, policy_version=i, metadata={"split": "train"}, rollout_id=f"r{i}")
        s.transition_rollout(r.id, RolloutStatus.RUNNING)
        s.record_calls([_call(r.id, [1, 2, 3], [4, 5], temperature=0.7)])
        if shape == "error-call":  # an excluded call between two trained ones: indices have a gap
            s.record_calls([_call(r.id, [1, 2, 3, 4, 5], [], status=CallStatus.ERROR)])
        s.record_calls([_call(r.id, [1, 2, 3, 4, 5, 6], [7, 8], temperature=0.7, version=3)])
        if shape == "split":
            s.record_calls([_call(r.id, [9, 9], [8, 8, 8])])
            s.record_calls([_call(r.id, [9, 9, 8, 8, 8, 10], [11])])
        if shape == "greedy-mixed":
            s.record_calls([_call(r.id, [1, 2, 3, 4, 5, 6, 7, 8, 12], [13], temperature=1.3)])
        s.add_reward(r.id, 0.25, "judge")
        s.add_reward(r.id, 0.5 * (i % 3), "final")
        s.add_reward(r.id, 0.125, "per_call", call_index=len(s.get_calls(r.id)) - 1)
        if shape == "failed":
            s.transition_rollout(r.id, RolloutStatus.FAILED, failure_kind=FailureKind.AGENT)
        else:
            s.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    return s


def _view(store: Store, run_id: str) -> list[tuple]:
    """Everything a trainer reads of a run's rollouts, in rollout order, without ids."""
    out = []
    for r in store.list_rollouts(run_id=run_id, limit=1000):
        calls = store.get_calls(r.id)
        index = {c.index: n for n, c in enumerate(c for c in calls if c.completion_token_ids)}
        samples = build_samples(calls, r.group_id).samples
        out.append((
            r.task_id, r.group_id, r.step, r.policy_version, r.metadata.get("split"), r.status, r.failure_kind,
            [(w.name, w.value, None if w.call_index is None else index[w.call_index])
             for w in store.get_rewards(r.id)],
            [(s.token_ids, s.loss_mask, s.behaviour_logprobs, s.temperatures, s.fidelity, s.fidelity_reason,
              s.call_spans, s.policy_versions, s.redacted) for s in samples],
        ))
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_import_round_trips_exactly(source: Store, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"samples.{fmt}"
    n = export(source, out, fmt, run_id="run-1")  # type: ignore[arg-type]
    assert n == 6
    dest = open_store(f"sqlite:///{tmp_path / 'dest.db'}")
    report = import_file(dest, out)
    assert report.rollouts == 5 and report.kind == "samples"
    before, after = _view(source, "run-1"), _view(dest, report.run_id)
    assert after == before
    # the fixture covers what could go wrong: merged and split samples, a temperature, a gap, a failure
    assert {"merged", "split"} <= {str(s[4]) for row in before for s in row[8]}
    assert any(s[3] is not None for row in before for s in row[8])
    assert sum(len(row[8]) for row in after) == 6
    again = tmp_path / f"again.{fmt}"
    export(dest, again, fmt, run_id=report.run_id)  # type: ignore[arg-type]
    strip = ("rollout_id", "run_id", "call_indices", "request", "response", "rewards")
    first = _records(out, fmt)
    second = _records(again, fmt)
    assert [{k: v for k, v in r.items() if k not in strip} for r in second] == \
        [{k: v for k, v in r.items() if k not in strip} for r in first]


def _records(path: Path, fmt: str) -> list[dict]:
    if fmt == "jsonl":
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_every_record_says_its_format_version(source: Store, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    export(source, out, "jsonl")
    recs = _records(out, "jsonl")
    assert {r["format_version"] for r in recs} == {FORMAT_VERSION}
    doc = (Path(__file__).resolve().parents[3] / "docs" / "trajectory-format.md").read_text()
    assert f"format_version: {FORMAT_VERSION}" in doc or f"`format_version` = {FORMAT_VERSION}" in doc
    for key in recs[0]:
        assert f"`{key}`" in doc, f"docs/trajectory-format.md does not document {key}"


def test_a_newer_or_unversioned_file_is_refused_with_what_to_do(source: Store, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    export(source, out, "jsonl")
    recs = _records(out, "jsonl")
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(b"\n".join(orjson.dumps({**r, "format_version": FORMAT_VERSION + 1}) for r in recs))
    with pytest.raises(ImportFormatError, match="upgrade harnessrl"):
        import_file(source, newer)
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(b"\n".join(orjson.dumps({k: v for k, v in r.items() if k != "format_version"}) for r in recs))
    with pytest.raises(ImportFormatError, match="export it again"):
        import_file(source, bare)


def test_import_cli_into_a_store_url(source: Store, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "s.jsonl"
    export(source, out, "jsonl", run_id="run-1")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["import", str(out), "--into", db, "--run", "copied"]) == 0
    assert "imported 5 rollouts" in capsys.readouterr().err
    assert _view(open_store(db), "copied") == _view(source, "run-1")
