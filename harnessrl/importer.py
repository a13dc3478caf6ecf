"""``harnessrl import``: traces from elsewhere into the store, where SFT (and the dashboard) can read them.

Two inputs:

- a ``harnessrl export`` file (Parquet or JSON Lines, ``docs/trajectory-format.md``): each sample becomes
  the calls that produce it again (a completion span is one call whose prompt is every token before it),
  so ``build_samples`` over the imported rollout gives back the same token IDs, loss masks, behaviour
  logprobs and temperatures, with the rollout's status and rewards. Nothing is re-tokenized.
- a JSON Lines file of OpenAI-style conversations (``{"messages": [...], "tools": [...], "reward": 1.0}``):
  there are no token IDs, so each assistant turn is rendered with the policy's chat template (its prompt:
  the messages before it plus the generation prompt; its completion: what the next render adds, up to and
  including the end-of-turn token). Those calls are marked ``retokenized`` with the reason and never
  count as exact: RL batches leave them out, SFT trains them.

Each import creates one run (``import-<hex>`` unless ``run_id`` is given) holding its rollouts.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harnessrl.export import FORMAT_VERSION
from harnessrl.store import Store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus


class ImportFormatError(ValueError):
    """The file is not a trajectory export this version reads, nor a conversations file."""


@dataclass
class ImportReport:
    """What an import wrote: its run, rollouts, calls, and how conversations were tokenized."""

    run_id: str
    kind: str
    rollouts: int = 0
    calls: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return (f"imported {self.rollouts} rollouts ({self.calls} calls, {self.kind}) into run {self.run_id}"
                + (f": {extra}" if extra else ""))


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a Parquet or JSON Lines file (by suffix; ``.parquet`` is Parquet)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        return list(pq.read_table(path).to_pylist())
    out = []
    for n, line in enumerate(path.read_bytes().splitlines(), start=1):
        if line.strip():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise ImportFormatError(f"{path}:{n}: not JSON ({exc})") from None
    return out


def detect_kind(records: Sequence[dict[str, Any]], path: str | Path) -> str:
    """``samples`` (a versioned export) or ``conversations``; an unknown or newer version is an error."""
    if not records:
        raise ImportFormatError(f"{path} holds no records")
    first = records[0]
    if "messages" in first:
        return "conversations"
    if "token_ids" in first:
        version = first.get("format_version")
        if version is None:
            raise ImportFormatError(f"{path} has token_ids but no format_version: export it again with this "
                                    "harnessrl (docs/trajectory-format.md)")
        if int(version) > FORMAT_VERSION:
            raise ImportFormatError(f"{path} is trajectory format {version}; this harnessrl reads up to "
                                    f"{FORMAT_VERSION}: upgrade harnessrl")
        return "samples"
    raise ImportFormatError(f"{path}: records have neither 'token_ids' (a harnessrl export) nor 'messages' "
                            "(OpenAI-style conversations); see docs/trajectory-format.md")


def new_run(store: Store, run_id: str | None, source: str, kind: str) -> str:
    run_id = run_id or f"import-{uuid.uuid4().hex[:8]}"
    store.create_run(f"import {Path(source).name}", {"import": {"source": str(source), "kind": kind,
                                                               "format_version": FORMAT_VERSION}}, run_id=run_id)
    return run_id


def finish_rollout(store: Store, rid: str, status: str, failure_kind: str | None) -> None:
    status_ = RolloutStatus(status)
    if status_ in (RolloutStatus.QUEUED, RolloutStatus.RUNNING):
        if status_ == RolloutStatus.RUNNING:
            store.transition_rollout(rid, RolloutStatus.RUNNING)
        return
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.transition_rollout(rid, status_, failure_kind=FailureKind(failure_kind) if failure_kind else None)


# -- a harnessrl export ------------------------------------------------------------------------------
def _calls_of_sample(rec: dict[str, Any]) -> Iterator[tuple[int, list[int], list[int], list[float], dict[str, Any],
                                                           int]]:
    """(original call index, prompt, completion, logprobs, sampling, policy version) per completion span."""
    tokens, mask, logprobs = rec["token_ids"], rec["loss_mask"], rec["behaviour_logprobs"]
    temps = rec.get("temperatures")
    for k, (start, end) in enumerate(rec["call_spans"]):
        sampling: dict[str, Any] = {}
        if temps is not None and temps[start] != 1.0:
            sampling["temperature"] = temps[start]
        masked = [i - start for i in range(start, end) if not mask[i]]
        if masked:  # placeholders of a secret: the sample keeps them under mask 0 (samples.py)
            sampling["redacted"] = {"prompt_spans": [], "completion_spans": [[[i, i + 1] for i in masked]]}
        yield (int(rec["call_indices"][k]), list(tokens[:start]), list(tokens[start:end]),
               [float(x) for x in logprobs[start:end]], sampling, int(rec["policy_versions"][k]))


def import_samples(store: Store, records: Sequence[dict[str, Any]], *, source: str,
                   run_id: str | None = None) -> ImportReport:
    """Write a versioned export's samples back as rollouts, calls and rewards (see the module docstring)."""
    run_id = new_run(store, run_id, source, "samples")
    report = ImportReport(run_id=run_id, kind="samples")
    by_rollout: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_rollout[rec["rollout_id"]].append(rec)
    for original, recs in by_rollout.items():
        recs.sort(key=lambda r: r["sample_index"])
        head = recs[0]
        rollout = store.create_rollout(
            task_id=head["task_id"], input={}, group_id=head["group_id"], api_key_hash="imported",
            policy_version=int(head["rollout_policy_version"] or 0), run_id=run_id, step=head["step"],
            metadata={"split": head["split"], "imported_from": original},
        )
        calls = sorted((c for rec in recs for c in _calls_of_sample(rec)), key=lambda c: c[0])
        new_index: dict[int, int] = {}
        for index, prompt, completion, logprobs, sampling, version in calls:
            (new_index[index],) = store.record_calls([NewCall(
                rollout.id, ApiKind.CHAT, CallStatus.OK, {}, None, prompt,
                [ChoiceTokens(completion, logprobs, "stop")], version, sampling=sampling)])
        for w in head["rewards"] or []:
            ci = w.get("call_index")
            store.add_reward(rollout.id, float(w["value"]), w["name"],
                             None if ci is None else new_index.get(int(ci)))
        finish_rollout(store, rollout.id, head["status"], head.get("failure_kind"))
        report.rollouts += 1
        report.calls += len(calls)
    return report


# -- OpenAI-style conversations ----------------------------------------------------------------------
def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, *, generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                         add_generation_prompt=generation_prompt)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(slots=True)
class TokenizedTurn:
    """One assistant turn rendered with the student's template: its prompt and its completion tokens."""

    prompt: list[int]
    completion: list[int]
    #: The render of the turn did not extend the render of the prompt (a template that rewrites history):
    #: its completion is what follows their common prefix, and the sample splits there.
    boundary_changed: bool = False
    #: Which message of the conversation this turn is.
    message_index: int = -1


def tokenize_conversation(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Any = None,
                          only: Collection[int] | None = None) -> list[TokenizedTurn]:
    """Each assistant message of ``messages`` (or those at the indices ``only``: the others are context the
    policy did not write, as an ATIF trajectory can say) as (prompt, completion) token IDs under the template."""
    from harnessrl.training.samples import common_prefix_length

    eos = tokenizer.eos_token_id
    turns = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or (only is not None and i not in only):
            continue
        prompt = _render(tokenizer, list(messages[:i]), tools, generation_prompt=True)
        full = _render(tokenizer, list(messages[: i + 1]), tools, generation_prompt=False)
        k = common_prefix_length(prompt, full)
        completion = full[k:]
        if eos is not None and eos in completion:  # the template's glue after the end-of-turn token is context
            completion = completion[: completion.index(eos) + 1]
        if completion:
            turns.append(TokenizedTurn(prompt[:k] if k < len(prompt) else prompt, completion, k < len(prompt), i))
    return turns


def import_conversations(store: Store, records: Sequence[dict[str, Any]], tokenizer: Any, *, source: str,
                         model: str, run_id: str | None = None) -> ImportReport:
    """Write conversations as rollouts whose calls are the student's tokenization of each assistant turn."""
    run_id = new_run(store, run_id, source, "conversations")
    report = ImportReport(run_id=run_id, kind="conversations")
    reason = f"re-tokenized from text with {model}'s chat template (imported from {Path(source).name})"
    for n, rec in enumerate(records):
        messages = rec.get("messages")
        if not isinstance(messages, list):
            raise ImportFormatError(f"{source} record {n}: 'messages' must be a list of chat messages")
        turns = tokenize_conversation(tokenizer, messages, rec.get("tools"))
        if not turns:
            report.counts["skipped.no_assistant_turn"] += 1
            continue
        digest = hashlib.sha256(orjson.dumps(messages[:1], option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
        task_id = str(rec.get("task_id") or f"conv-{digest}")
        rollout = store.create_rollout(task_id=task_id, input={}, group_id=f"{run_id}-{task_id}",
                                       api_key_hash="imported", run_id=run_id, step=None,
                                       metadata={"split": rec.get("split", "train"), "imported_from": f"{source}:{n}"})
        for t in turns:
            store.record_calls([NewCall(rollout.id, ApiKind.CHAT, CallStatus.OK, {}, None, t.prompt,
                                        [ChoiceTokens(t.completion, [0.0] * len(t.completion), "stop")], 0,
                                        sampling={"retokenized": reason})])
            report.counts["boundary_changed"] += int(t.boundary_changed)
        if rec.get("reward") is not None:
            store.add_reward(rollout.id, float(rec["reward"]), "final")
        finish_rollout(store, rollout.id, "succeeded", None)
        report.rollouts += 1
        report.calls += len(turns)
    return report


def conversations_of_run(store: Store, run_id: str) -> tuple[list[dict[str, Any]], Counter[str]]:
    """A recorded run's rollouts as conversations: the last chat call's request messages plus its reply.

    For traces recorded while the gateway forwarded to a *different* model (a teacher behind
    ``--engine URL``): its token IDs are the teacher's, so the student trains on the text, re-tokenized.
    Only OpenAI chat calls are read; other APIs are counted and skipped.
    """
    from harnessrl.rewards.outcome import rollout_reward

    out: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    offset = 0
    while True:
        page = store.list_rollouts(run_id=run_id, status=RolloutStatus.SUCCEEDED, limit=500, offset=offset)
        for r in page:
            calls = [c for c in store.get_calls(r.id) if c.status == CallStatus.OK and c.response]
            if not calls or calls[-1].api != ApiKind.CHAT:
                counts["skipped.no_chat_call"] += 1
                continue
            last = calls[-1]
            choices = (last.response or {}).get("choices") or []
            message = choices[0].get("message") if choices else None
            if not isinstance(message, dict):
                counts["skipped.no_reply"] += 1
                continue
            reply = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls") and v is not None}
            out.append({"messages": [*last.request.get("messages", []), reply], "tools": last.request.get("tools"),
                        "reward": rollout_reward(store.get_rewards(r.id)), "task_id": r.task_id,
                        "split": r.metadata.get("split", "train"), "recorded": [
                            (list(c.prompt_token_ids), list(c.completion_token_ids)) for c in calls]})
        if len(page) < 500:
            return out, counts
        offset += len(page)


def import_run(source: Store, run_id: str, store: Store, tokenizer: Any, *, model: str,
               dest_run_id: str | None = None) -> ImportReport:
    """Re-tokenize a recorded run's conversations with the student's template into ``store``; counts the
    turns whose token boundaries changed (the student's tokens of a turn differ from the recorded ones)."""
    records, skipped = conversations_of_run(source, run_id)
    report = import_conversations(store, records, tokenizer, source=f"run {run_id}", model=model, run_id=dest_run_id)
    report.counts.update(skipped)
    for rec in records:
        turns = tokenize_conversation(tokenizer, rec["messages"], rec.get("tools"))
        recorded = rec["recorded"]
        for t, (_, completion) in zip(turns, recorded[-len(turns):] if turns else [], strict=False):
            report.counts["tokens_changed"] += int(t.completion != completion)
    return report


def import_file(store: Store, path: str | Path, *, tokenizer_spec: str | None = None,
                run_id: str | None = None) -> ImportReport:
    """Import ``path`` (kind detected from its records) into ``store``."""
    records = read_records(path)
    kind = detect_kind(records, path)
    if kind == "samples":
        return import_samples(store, records, source=str(path), run_id=run_id)
    if tokenizer_spec is None:
        raise ImportFormatError("conversations carry no token IDs: importing them needs the policy's tokenizer "
                                "(--into CONFIG uses [engine] model, or pass --tokenizer MODEL)")
    from harnessrl.models import load_tokenizer

    return import_conversations(store, records, load_tokenizer(tokenizer_spec), source=str(path),
                                model=tokenizer_spec, run_id=run_id)
