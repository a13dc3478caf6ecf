"""``harnessrl export``: the recorded training view as a dataset (Parquet or JSON Lines).

One record per **sample** (one training sequence: ``build_samples`` over a rollout's calls), carrying
its rollout's fields and rewards. That is the unit an SFT or offline-RL job consumes: ``token_ids``,
``loss_mask`` (1 = sampled by the policy) and ``behaviour_logprobs`` line up token for token, so no
re-tokenization is needed. The conversation of the sample's last call (``request`` / ``response``, JSON
text) is included for text-based use; rollouts without any trainable call yield no record, and rollouts
that retention purged are skipped with a warning that counts them.

Redaction: the gateway stores requests and responses redacted already; export applies the configured
patterns again (the gateway's defaults, the run's ``[gateway] redact_patterns`` and any ``--redact``),
so a store recorded with weaker patterns does not leak through an export. The gateway replaced a
secret's tokens with a placeholder when it recorded the call (``docs/security.md``); export decodes each
sample once more with the run's tokenizer (``engine.model``, when it loads here) and replaces what still
matches the same way, so a store recorded before token redaction does not leak either. ``redacted``
counts the placeholders of a sample; they are under loss mask 0.

Load with ``datasets.load_dataset("parquet", data_files=PATH)`` or ``("json", data_files=PATH)``.
The schema is versioned: every record carries ``format_version`` (``FORMAT_VERSION``), documented field
by field in ``docs/trajectory-format.md``; ``harnessrl import`` (``harnessrl/importer.py``) reads it back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson

from harnessrl.inspection.rollout_view import sample_config
from harnessrl.redaction.text import redactor_for
from harnessrl.redaction.tokens import TokenRedactor, scrub_sample
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import NotFound, Store
from harnessrl.training.samples import build_samples
from harnessrl.types import RolloutStatus, Run

log = logging.getLogger(__name__)

Format = Literal["parquet", "jsonl"]
#: Version of the record schema (docs/trajectory-format.md). Bump it when a field changes meaning or goes.
FORMAT_VERSION = 1


def _schema() -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    reward = pa.struct([("name", pa.string()), ("value", pa.float64()), ("call_index", pa.int64())])
    return pa.schema([
        ("format_version", pa.int64()), ("rollout_id", pa.string()), ("run_id", pa.string()), ("task_id", pa.string()), ("group_id", pa.string()),
        ("step", pa.int64()), ("split", pa.string()), ("status", pa.string()), ("failure_kind", pa.string()),
        ("rollout_policy_version", pa.int64()), ("reward", pa.float64()), ("rewards", pa.list_(reward)),
        ("sample_index", pa.int64()), ("num_samples", pa.int64()), ("fidelity", pa.string()),
        ("fidelity_reason", pa.string()), ("call_indices", pa.list_(pa.int64())),
        ("policy_versions", pa.list_(pa.int64())), ("call_spans", pa.list_(pa.list_(pa.int64()))),
        ("token_ids", pa.list_(pa.int64())), ("loss_mask", pa.list_(pa.int8())),
        ("behaviour_logprobs", pa.list_(pa.float32())),
        ("temperatures", pa.list_(pa.float64())), ("redacted", pa.int64()), ("request", pa.string()),
        ("response", pa.string()),
    ])


class TokenScrubbers:
    """A token redactor per run's model (``engine.model``, its tokenizer loaded once, offline); None for a
    run whose tokenizer is not here: its token IDs are exported as stored."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = list(patterns)
        self._by_spec: dict[str, TokenRedactor | None] = {}

    def get(self, run: Run | None) -> TokenRedactor | None:
        engine = run.config.get("engine") if run is not None and isinstance(run.config, dict) else None
        spec = engine.get("model") if isinstance(engine, dict) else None
        if not isinstance(spec, str) or not spec:
            return None
        if spec not in self._by_spec:
            try:
                from harnessrl.models import load_tokenizer

                self._by_spec[spec] = TokenRedactor(self.patterns, load_tokenizer(spec))
            except Exception as exc:  # noqa: BLE001 - no model files here: tokens as the gateway stored them
                log.warning("no tokenizer for %r (%s): its token IDs are exported as stored (the gateway "
                            "redacted them when it recorded the calls)", spec, exc)
                self._by_spec[spec] = None
        return self._by_spec[spec]


def sample_records(store: Store, *, run_id: str | None = None, status: RolloutStatus | None = None,
                   redact: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """Every sample of the selected rollouts as a flat record (see the module docstring)."""
    runs = {r.id: r for r in store.list_runs()}
    if run_id is not None and run_id not in runs:
        raise NotFound(f"run {run_id!r} does not exist")
    redactor = redactor_for(list(runs.values()) if run_id is None else [runs[run_id]], redact)
    tokens = TokenScrubbers(redactor.patterns)
    purged = 0
    for r in store.iter_rollouts(run_id=run_id, status=status):
        if r.purged_at is not None:  # retention emptied its calls: say so rather than export nothing quietly
            purged += 1
            continue
        run = runs.get(r.run_id) if r.run_id else None
        calls = {c.index: c for c in store.get_calls(r.id)}
        built = build_samples(list(calls.values()), r.group_id, sample_config(run), rollout_id=r.id)
        if not built.samples:
            continue
        rewards = store.get_rewards(r.id)
        scrub = tokens.get(run)
        for i, s in enumerate(built.samples):
            if scrub is not None:  # a store recorded before token redaction (or with weaker patterns)
                s = scrub_sample(scrub, s)
            last = calls[s.call_indices[-1]]
            yield {
                "format_version": FORMAT_VERSION, "rollout_id": r.id, "run_id": r.run_id, "task_id": r.task_id, "group_id": r.group_id,
                "step": r.step, "split": r.metadata.get("split"), "status": r.status.value,
                "failure_kind": r.failure_kind.value if r.failure_kind else None,
                "rollout_policy_version": r.policy_version, "reward": rollout_reward(rewards),
                "rewards": [{"name": w.name, "value": w.value, "call_index": w.call_index} for w in rewards],
                "sample_index": i, "num_samples": len(built.samples), "fidelity": s.fidelity.value,
                "fidelity_reason": s.fidelity_reason, "call_indices": list(s.call_indices),
                "policy_versions": list(s.policy_versions), "call_spans": [list(sp) for sp in s.call_spans],
                "token_ids": list(s.token_ids), "loss_mask": list(s.loss_mask),
                "behaviour_logprobs": list(s.behaviour_logprobs),
                "temperatures": None if s.temperatures is None else list(s.temperatures), "redacted": s.redacted,
                "request": orjson.dumps(redactor(last.request)).decode(),
                "response": None if last.response is None else orjson.dumps(redactor(last.response)).decode(),
            }
    if purged:
        log.warning("%d selected rollouts were purged by retention (docs/retention.md) and are not exported", purged)


def export(store: Store, out: str | Path, fmt: Format = "parquet", *, run_id: str | None = None,
           status: RolloutStatus | None = None, redact: Sequence[str] = (), batch_rows: int = 512) -> int:
    """Write the records to ``out`` (written to a temporary name, then renamed); returns how many."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    records = sample_records(store, run_id=run_id, status=status, redact=redact)
    n = 0
    try:
        if fmt == "jsonl":
            with tmp.open("wb") as f:
                for rec in records:
                    f.write(orjson.dumps(rec) + b"\n")
                    n += 1
        elif fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            schema = _schema()
            with pq.ParquetWriter(tmp, schema) as writer:
                batch: list[dict[str, Any]] = []
                for rec in records:
                    batch.append(rec)
                    if len(batch) >= batch_rows:
                        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                        n, batch = n + len(batch), []
                if batch or n == 0:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    n += len(batch)
        else:
            raise ValueError(f"unknown export format {fmt!r}: use 'parquet' or 'jsonl'")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("exported %d samples to %s", n, out)
    return n
