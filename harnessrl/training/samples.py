"""From a rollout's recorded calls to training samples (pure functions).

A harness re-sends its conversation on every call. When a call's prompt token IDs start with an earlier
sequence (that sequence's prompt + completion, token for token), the call is merged into it: the tokens
in between (tool results, chat-template glue) become context with loss mask 0 and the sampled completion
is appended with mask 1 and the engine's behaviour logprobs. Nothing is re-tokenized, so the trainer
scores exactly the tokens the engine sampled.

When no earlier sequence is a prefix (the harness summarised or edited its history), a new sample starts
and records why (``split`` fidelity with a reason). A call may extend an *older* sample than the last one
(retries, sub-agents, n>1 choices): the longest sequence that is a prefix of the prompt wins, so branches
are followed rather than broken. Each sample is one *chain* of the rollout: it is numbered and says why it
started (``Sample.chain_start``: first, compaction, summary, sub-agent, prefix break, choice; see
``chains.py``). No chain is dropped for being one: every trained call's completion lands in exactly one
sample, and all of a rollout's samples get its advantage.

A call whose text held a secret was stored with the secret's tokens replaced by a placeholder
(``sampling["redacted"]``, see ``redaction/tokens.py``). Such a token is never trained: in a
completion it gets loss mask 0 (the model sampled the secret, not the placeholder, and its logprob belongs to
the secret), and in the prompt it is context the model did not see. The rest of the call is trained
(``SampleConfig.redacted = "mask"``) or the call is left out (``"drop"``); the sample counts its
placeholders in ``Sample.redacted``. A call whose token arrays were dropped has nothing left to train.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessrl.training.chains import Break, Step, label_breaks
from harnessrl.training.config import SampleConfig
from harnessrl.types import Call, CallStatus, ChainStart, Sample, SampleFidelity


@dataclass(slots=True)
class SampleSet:
    """The samples of one rollout plus counts of what was excluded, truncated or dropped, and why."""

    samples: list[Sample]
    counts: Counter[str] = field(default_factory=Counter)


#: Placeholder positions of a call's prompt and of one of its completions (``redacted_positions``).
_Redacted = tuple[frozenset[int], frozenset[int]]


def redacted_positions(call: Call, choice: int | None = 0) -> frozenset[int]:
    """Positions the gateway replaced by a placeholder in the call's prompt (``choice`` None) or in one
    choice's completion, from ``sampling["redacted"]``."""
    marker = call.sampling.get("redacted") if isinstance(call.sampling, dict) else None
    if not isinstance(marker, dict):
        return frozenset()
    if choice is None:
        spans: Any = marker.get("prompt_spans") or []
    else:
        per_choice = marker.get("completion_spans") or []
        spans = per_choice[choice] if choice < len(per_choice) else []
    return frozenset(i for s, e in spans for i in range(int(s), int(e)))


def _redacted(call: Call, choice: int) -> _Redacted | None:
    if "redacted" not in call.sampling:
        return None
    return redacted_positions(call, None), redacted_positions(call, choice)


@dataclass(slots=True)
class _Open:
    """A sample under construction (mutable; frozen into ``Sample`` at the end)."""

    tokens: list[int]
    mask: list[int]
    logprobs: list[float]
    versions: list[int] = field(default_factory=list)
    call_indices: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    temps: list[float] = field(default_factory=list)
    fidelity: SampleFidelity = SampleFidelity.EXACT
    reason: str | None = None
    redacted: list[int] = field(default_factory=list)  # positions of placeholder tokens
    chain: int = 0
    chain_start: ChainStart = ChainStart.FIRST
    parent_chain: int | None = None
    summary_call: int | None = None

    def append_call(self, call_index: int, version: int, context: Sequence[int], completion: Sequence[int],
                    logprobs: Sequence[float], temperature: float = 1.0, redacted: _Redacted | None = None,
                    context_offset: int = 0) -> None:
        """Append ``context`` (mask 0; it is the call's prompt from ``context_offset`` on) and
        ``completion`` (mask 1, except the placeholders ``redacted`` names)."""
        in_prompt, in_completion = redacted or (frozenset(), frozenset())
        base = len(self.tokens) - context_offset
        self.redacted.extend(base + i for i in sorted(in_prompt) if context_offset <= i < context_offset + len(context))
        self.tokens.extend(context)
        self.mask.extend([0] * len(context))
        self.logprobs.extend([0.0] * len(context))
        self.temps.extend([1.0] * len(context))
        start = len(self.tokens)
        self.tokens.extend(completion)
        self.mask.extend(0 if i in in_completion else 1 for i in range(len(completion)))
        self.redacted.extend(start + i for i in sorted(in_completion) if i < len(completion))
        self.logprobs.extend(0.0 if i in in_completion else float(x) for i, x in enumerate(logprobs))
        self.temps.extend([temperature] * len(completion))
        self.spans.append((start, len(self.tokens)))
        self.call_indices.append(call_index)
        self.versions.append(version)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]; slices compare at C speed
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if list(a[:mid]) == list(b[:mid]):
            lo = mid
        else:
            hi = mid
    return lo


def call_temperature(call: Call) -> float:
    """The temperature a call was sampled at (the OpenAI default 1.0 when the request did not say)."""
    value = call.sampling.get("temperature")
    return 1.0 if value is None else float(value)


def _exclusion_reason(call: Call, config: SampleConfig) -> str | None:
    if call.purged_at is not None:
        return "purged"  # retention emptied it (docs/retention.md): nothing left to train on
    if call.status != CallStatus.OK:
        return f"status_{call.status.value}"
    if call.sampling.get("images"):
        return "images"  # the prompt held images: the trainer reads token IDs, not the pixels behind them
    marker = call.sampling.get("redacted")
    if marker:
        if isinstance(marker, dict) and marker.get("dropped"):
            return "redacted_dropped"  # its token arrays were not stored: nothing to train on
        if config.redacted == "drop":
            return "redacted"
    if call_temperature(call) <= 0.0:
        return "greedy"  # argmax decoding has no sampling distribution to compute a ratio against
    if not call.completion_token_ids:
        return "no_completion_tokens"
    if len(call.completion_logprobs) != len(call.completion_token_ids):
        return "logprobs_mismatch"
    if not call.prompt_token_ids:
        return "empty_prompt"
    return None


#: A fresh sample's closest earlier chain and how many tokens of the prompt they share.
_Closest = tuple[int, int]


def _split_reason(prompt: Sequence[int], opened: list[_Open]) -> tuple[SampleFidelity, str | None, _Closest | None]:
    """Fidelity of a sample that starts fresh, explained against the closest earlier sequence (returned
    too, for ``chains.label_breaks``)."""
    if not opened:
        return SampleFidelity.EXACT, None, None
    best_len, best = -1, opened[-1]
    for cand in reversed(opened):  # latest first, so ties name the most recent sequence
        k = common_prefix_length(prompt, cand.tokens)
        if k > best_len:
            best_len, best = k, cand
    closest = (best.chain, best_len)
    if best_len == len(prompt) < len(best.tokens):
        return SampleFidelity.SPLIT, (
            f"prompt shorter than previous sequence ({len(prompt)} < {len(best.tokens)} tokens)"
        ), closest
    return SampleFidelity.SPLIT, f"prefix broken at token {best_len} of {len(best.tokens)}", closest


def _find_parent(prompt: Sequence[int], opened: list[_Open]) -> _Open | None:
    """The longest open sequence that is a prefix of ``prompt`` (latest wins ties)."""
    parent: _Open | None = None
    for cand in reversed(opened):
        n = len(cand.tokens)
        if n <= len(prompt) and (parent is None or n > len(parent.tokens)) and prompt[:n] == cand.tokens:
            parent = cand
    return parent


def build_samples(
    calls: Sequence[Call],
    group_id: str,
    config: SampleConfig | None = None,
    rollout_id: str | None = None,
) -> SampleSet:
    """Turn one rollout's calls (as ``Store.get_calls`` returns them) into training samples.

    Calls that errored, were cancelled, were purged, or carry no completion token IDs are excluded and counted
    (``excluded.<reason>``); over-long samples are truncated or dropped per ``config`` and counted
    (``overflow.truncated`` / ``overflow.dropped``). Only choice 0 of an ``n > 1`` call is trained unless
    ``config.choices == "all"``; each extra choice then becomes its own sample with the prompt as context.
    Trained calls are counted by how the gateway rendered their prompt (``render.exact`` / ``extended`` /
    ``rerendered``): the run-wide fidelity of the token-exact render mode, step by step.
    """
    config = config or SampleConfig()
    counts: Counter[str] = Counter()
    opened: list[_Open] = []
    steps: list[Step] = []  # choice 0 of every trained call, in order, with the chain it went to
    breaks: list[Break] = []
    for call in sorted(calls, key=lambda c: c.index):
        reason = _exclusion_reason(call, config)
        if reason is not None:
            counts[f"excluded.{reason}"] += 1
            continue
        rollout_id = rollout_id or call.rollout_id
        if call.fidelity is not None:  # how the gateway built the prompt (token-exact render mode)
            counts[f"render.{call.fidelity.value}"] += 1
        prompt = list(call.prompt_token_ids)
        redacted = _redacted(call, 0)
        if redacted is not None:
            counts["redacted.calls"] += 1
            counts["redacted.completion_tokens_masked"] += len(redacted[1])
        parent = _find_parent(prompt, opened)
        if parent is not None:
            if parent.fidelity == SampleFidelity.EXACT:
                parent.fidelity = SampleFidelity.MERGED
            parent.append_call(call.index, call.policy_version, prompt[len(parent.tokens):],
                               call.completion_token_ids, call.completion_logprobs, call_temperature(call),
                               redacted, context_offset=len(parent.tokens))
            counts["calls.merged"] += 1
        else:
            fidelity, why, closest = _split_reason(prompt, opened)
            fresh = _Open(tokens=[], mask=[], logprobs=[], fidelity=fidelity, reason=why, chain=len(opened))
            if closest is not None:
                breaks.append(Break(fresh.chain, len(steps), *closest))
            fresh.append_call(call.index, call.policy_version, prompt, call.completion_token_ids,
                              call.completion_logprobs, call_temperature(call), redacted)
            opened.append(fresh)
        steps.append(Step(call.index, (parent or opened[-1]).chain, prompt, call.completion_token_ids))
        retokenized = call.sampling.get("retokenized")
        if retokenized:  # imported text rendered by a tokenizer, not sampled tokens: never passed off as exact
            target = parent if parent is not None else opened[-1]
            target.fidelity, target.reason = SampleFidelity.RETOKENIZED, str(retokenized)
        if config.choices == "all":
            for j, choice in enumerate(call.choices[1:], start=1):
                if not choice.token_ids or len(choice.logprobs) != len(choice.token_ids):
                    counts["excluded.choice_without_tokens"] += 1
                    continue
                extra = _Open(tokens=[], mask=[], logprobs=[], fidelity=SampleFidelity.SPLIT,
                              reason=f"choice {j} of call {call.index}", chain=len(opened),
                              chain_start=ChainStart.CHOICE, parent_chain=steps[-1].chain)
                extra.append_call(call.index, call.policy_version, prompt, choice.token_ids, choice.logprobs,
                                  call_temperature(call), _redacted(call, j))
                opened.append(extra)
        elif len(call.choices) > 1:
            counts["excluded.extra_choices"] += len(call.choices) - 1
    for chain, label in label_breaks(steps, breaks).items():
        o = opened[chain]
        o.chain_start, o.parent_chain, o.summary_call = label.start, label.parent, label.summary_call
    samples = []
    for o in opened:
        sample = _finish(o, rollout_id or "", group_id, config, counts)
        if sample is not None:
            samples.append(sample)
            counts[f"fidelity.{sample.fidelity.value}"] += 1
            counts[f"chains.{sample.chain_start.value}"] += 1
    return SampleSet(samples=samples, counts=counts)


def _finish(o: _Open, rollout_id: str, group_id: str, config: SampleConfig, counts: Counter[str]) -> Sample | None:
    if not any(o.mask):  # every sampled token was a secret's placeholder: nothing to train
        counts["redacted.no_trained_tokens"] += 1
        return None
    limit = config.max_sequence_length
    if len(o.tokens) > limit:
        if config.overflow == "drop":
            counts["overflow.dropped"] += 1
            return None
        counts["overflow.truncated"] += 1
        keep = [i for i, (s, _) in enumerate(o.spans) if s < limit]
        o.tokens, o.mask, o.logprobs = o.tokens[:limit], o.mask[:limit], o.logprobs[:limit]
        o.temps = o.temps[:limit]
        o.spans = [(o.spans[i][0], min(o.spans[i][1], limit)) for i in keep]
        o.call_indices = [o.call_indices[i] for i in keep]
        o.versions = [o.versions[i] for i in keep]
        if not any(o.mask):
            counts["overflow.dropped"] += 1
            return None
    return Sample(
        rollout_id=rollout_id,
        group_id=group_id,
        token_ids=o.tokens,
        loss_mask=o.mask,
        behaviour_logprobs=o.logprobs,
        policy_versions=o.versions,
        call_indices=o.call_indices,
        fidelity=o.fidelity,
        fidelity_reason=o.reason,
        call_spans=o.spans,
        temperatures=o.temps if any(t != 1.0 for t in o.temps) else None,
        redacted=sum(1 for i in o.redacted if i < len(o.tokens)),
        chain=o.chain,
        chain_start=o.chain_start,
        parent_chain=o.parent_chain,
        summary_call=o.summary_call,
    )
