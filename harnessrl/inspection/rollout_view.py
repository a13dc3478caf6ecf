"""One rollout as the dashboard and ``harnessrl show`` present it: calls, rewards, samples.

Pure data: pages and the terminal only lay it out. Reads one rollout's calls; never a scan of the store.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harnessrl.inspection.rollout_pages import duration_s
from harnessrl.redaction.text import redact_rollout, redactor_for
from harnessrl.store import NotFound, Store
from harnessrl.store.judge_calls import JudgeCall
from harnessrl.training.config import SampleConfig, TrainingConfig
from harnessrl.training.samples import SampleSet, build_samples
from harnessrl.types import Call, CallStatus, Reward, Rollout, Run, Sample


def sample_config(run: Run | None) -> SampleConfig:
    """The run's sample settings (so the page shows the samples training built), default otherwise."""
    if run is None:
        return SampleConfig()
    try:
        return TrainingConfig.model_validate(run.config.get("training") or {}).samples
    except Exception:  # an older or foreign config: the defaults still explain the split
        return SampleConfig()


@dataclass
class CallTraining:
    """How one call's completion entered training."""

    sample_index: int | None
    sample: Sample | None
    trained_tokens: int
    note: str
    #: How its max_tokens was lowered below what it asked for (``clamp_note``), or None.
    clamp: str | None = None


def call_training(call: Call, samples: SampleSet) -> CallTraining:
    out = _call_training(call, samples)
    out.clamp = clamp_note(call)
    return out


def _call_training(call: Call, samples: SampleSet) -> CallTraining:
    for i, s in enumerate(samples.samples):
        if call.index in s.call_indices:
            start, end = s.call_spans[s.call_indices.index(call.index)]
            n = end - start
            note = f"sample {i} ({s.fidelity.value})"
            if n < len(call.completion_token_ids):
                note += f"; truncated to {n} of {len(call.completion_token_ids)} tokens (max_sequence_length)"
            trained = sum(s.loss_mask[start:end])
            if trained < n:
                note += f"; {n - trained} tokens of a secret redacted, not trained"
            return CallTraining(i, s, trained, note)
    marker = call.sampling.get("redacted")
    if call.purged_at is not None:
        why = "not trained: purged by retention"
    elif isinstance(marker, dict) and marker.get("dropped"):
        why = "not trained: its text held a secret and its token arrays were not stored"
    elif call.sampling.get("images"):
        why = f"not trained: its prompt held {call.sampling['images']} image(s) (the trainer reads tokens, not pixels)"
    elif call.status != CallStatus.OK:
        why = f"not trained: call {call.status.value}" + (f" ({call.error[:120]})" if call.error else "")
    elif not call.completion_token_ids:
        why = "not trained: no completion token IDs"
    elif len(call.completion_logprobs) != len(call.completion_token_ids):
        why = "not trained: logprobs do not match the completion tokens"
    elif marker:
        why = "not trained: its tokens held a secret (training.samples.redacted, or nothing else was sampled)"
    else:
        why = "not trained: its sample exceeded max_sequence_length and was dropped"
    return CallTraining(None, None, 0, why)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call answered with an error: what the harness was told, and on which route."""

    index: int
    status: CallStatus
    route: str
    code: str
    reason: str


def clamp_note(call: Call) -> str | None:
    """How a call's ``max_tokens`` was lowered below what it asked for, and whether the answer stopped
    there (a rollout that ends where the harness did not choose is what gets trained), or None."""
    asked = call.sampling.get("max_tokens_requested")
    if asked is None:
        return None
    why = {"cap": "the gateway's max_tokens_per_call", "budget": "the rollout's token budget",
           "context": "the room its context left"}.get(str(call.sampling.get("max_tokens_clamp")), "a limit")
    note = f"max_tokens: asked {asked}, served {call.sampling.get('max_tokens')} ({why})"
    stopped = any(c.finish_reason == "length" for c in call.choices)
    return note + ("; stopped there" if stopped else "")


_ERROR = re.compile(r"^(\d{3}) (\S+): (.*)$", re.S)


def refusals(calls: list[Call]) -> list[Refusal]:
    """The calls a harness got an error for (``refused`` before the engine was asked, or ``error`` while
    serving), in order: why a failing harness failed, from the rollout alone."""
    out = []
    for c in calls:
        if c.status not in (CallStatus.REFUSED, CallStatus.ERROR):
            continue
        m = _ERROR.match(c.error or "")  # the gateway writes "<status> <code>: <message>"
        code, reason = (f"{m[1]} {m[2]}", m[3]) if m else ("", c.error or "")
        route = c.sampling.get("route")
        out.append(Refusal(c.index, c.status, route if isinstance(route, str) else c.api.value, code, reason))
    return out


@dataclass
class RolloutView:
    rollout: Rollout
    run: Run | None
    calls: list[Call]
    rewards: list[Reward]
    samples: SampleSet
    duration_s: float | None
    #: What a model judge said about it (``[rewards.judge]``): never trained, shown beside the rewards.
    judge_calls: list[JudgeCall]

    @property
    def refusals(self) -> list[Refusal]:
        return refusals(self.calls)


def _run_or_none(store: Store, run_id: str | None) -> Run | None:
    if run_id is None:
        return None
    try:
        return store.get_run(run_id)
    except NotFound:
        return None


def rollout_view(store: Store, rollout_id: str) -> RolloutView:
    r = store.get_rollout(rollout_id)
    run = _run_or_none(store, r.run_id)
    r = redact_rollout(r, redactor_for([run] if run else []))  # what the harness and runner wrote
    calls = store.get_calls(rollout_id)
    samples = build_samples(calls, r.group_id, sample_config(run), rollout_id=r.id)
    return RolloutView(r, run, calls, store.get_rewards(rollout_id), samples, duration_s(r),
                       store.get_judge_calls(rollout_id))


def judge_exchange(store: Store, call: JudgeCall) -> tuple[str | None, str | None]:
    """``(prompt as text, raw answer)`` of a judge call: kept once per call, on its position-0 row (a group's
    other rows point there); None once retention purged them."""
    row = call
    if call.position != 0:
        rows = store.judge_call_rows(call.call_id)
        row = rows[0] if rows else call
    if row.request is None:
        return None, row.response
    try:
        body = json.loads(row.request)
        prompt = "\n\n".join(f"[{m.get('role')}]\n{m.get('content')}" for m in body.get("messages") or [])
    except (ValueError, AttributeError):
        prompt = row.request
    return prompt, row.response


def sample_segments(s: Sample) -> list[tuple[str, int, int | None]]:
    """A sample as ``(kind, tokens, call index)`` segments: context before each call, then its completion."""
    segs: list[tuple[str, int, int | None]] = []
    pos = 0
    for idx, (start, end) in zip(s.call_indices, s.call_spans, strict=True):
        if start > pos:
            segs.append(("context", start - pos, idx))
        segs.append(("completion", end - start, idx))
        pos = end
    if pos < len(s.token_ids):
        segs.append(("context", len(s.token_ids) - pos, None))
    return segs
