"""Secrets in token IDs: a call's stored token arrays are scrubbed too, not only its text.

Text redaction (``redact.py``) rewrites the stored request and response, but the call's prompt and
completion token IDs would still decode to the secret with the model's own tokenizer. ``TokenRedactor``
decodes each stored sequence (prompt + each choice's completion, then each on its own) with the served
model's tokenizer, finds the tokens whose text overlaps a match -- widened to whole tokens, since a secret
may start or end inside one -- and replaces them with one placeholder token (``*`` where the vocabulary has
it). Lengths are kept, so logprobs, sample spans and token budgets stay aligned. Every stored array is
decoded again afterwards; one that still matches (a tokenizer whose pieces do not add up) loses its token
arrays altogether. The call's ``sampling["redacted"]`` records what was replaced (positions and counts,
never text) so that training and the dashboard know which tokens are not what the model saw or sampled.

Only calls whose text had a match are decoded (plus calls with no response text to check, and token-ID
prompts): a clean call costs nothing here. Without a tokenizer (an engine whose tokenizer the gateway
does not know) the token arrays of a call whose text held a secret are dropped: safe, but the call cannot
be trained; token IDs with no text beside them cannot be checked then.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessrl.byte_level import BYTE_OF
from harnessrl.redaction.text import REPLACEMENT
from harnessrl.store.base import NewCall
from harnessrl.types import CallStatus, ChoiceTokens

log = logging.getLogger(__name__)

#: Decode/replace rounds before a call's token arrays are dropped instead.
MAX_ROUNDS = 3
#: Fields of a stored response (and its choices) that carry tokens: removed from a redacted call's record.
TOKEN_FIELDS = ("logprobs", "token_ids", "prompt_token_ids", "prompt_logprobs")
Span = tuple[int, int]


def without_fields(response: Any, fields: Collection[str]) -> Any:
    """A copy of a response without ``fields`` at its top level and in each of its choices (where per-token
    data sits in the OpenAI-shaped answers); anything but a dict is returned as it is."""
    if not isinstance(response, dict):
        return response
    out = {k: v for k, v in response.items() if k not in fields}
    if isinstance(out.get("choices"), list):
        out["choices"] = [{k: v for k, v in ch.items() if k not in fields} if isinstance(ch, dict) else ch
                          for ch in out["choices"]]
    return out


def _is_byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    return type(decoder).__name__ == "ByteLevel"


def placeholder_id(tokenizer: Any) -> int:
    """The token that stands in for a secret's tokens: ``*`` when it is one token, else unk, else 0."""
    try:
        ids = tokenizer.encode("*", add_special_tokens=False)
        if len(ids) == 1:
            return int(ids[0])
    except Exception:  # noqa: BLE001 - any tokenizer: fall back below
        pass
    unk = getattr(tokenizer, "unk_token_id", None)
    return int(unk) if isinstance(unk, int) else 0


@dataclass(slots=True)
class _Arrays:
    """The call's token arrays being scrubbed (copies: the gateway keeps the originals in memory)."""

    prompt: list[int]
    choices: list[list[int]]
    prompt_spans: list[Span] = field(default_factory=list)
    choice_spans: list[list[Span]] = field(default_factory=list)


class TokenRedactor:
    """Finds and replaces the tokens of secrets in a call's token arrays (see the module docstring)."""

    def __init__(self, patterns: Sequence[str], tokenizer: Any = None) -> None:
        joined = "|".join(f"(?:{p})" for p in patterns)
        self._re = re.compile(joined) if patterns else None
        self._re_bytes = re.compile(joined.encode()) if patterns else None
        self.tokenizer = tokenizer
        self.placeholder = placeholder_id(tokenizer) if tokenizer is not None else 0
        self._byte_level = tokenizer is not None and _is_byte_level(tokenizer)
        self._pieces: dict[int, bytes] = {}  # token id -> its bytes (byte-level vocabularies)
        # the Rust tokenizer itself when there is one: transformers' decode wrapper costs more than decoding
        backend = getattr(tokenizer, "backend_tokenizer", None) if tokenizer is not None else None
        self._backend = backend if hasattr(backend, "decode") else None
        self._special = _special_ids(tokenizer, self._backend)

    def with_known(self, patterns: Sequence[str]) -> TokenRedactor:
        """The same redactor (tokenizer, caches) searching ``patterns`` instead."""
        other = copy.copy(self)
        joined = "|".join(f"(?:{p})" for p in patterns)
        other._re = re.compile(joined) if patterns else None
        other._re_bytes = re.compile(joined.encode()) if patterns else None
        return other

    @property
    def active(self) -> bool:
        return self._re is not None

    # -- the call -------------------------------------------------------------------------------------
    def needs_scan(self, call: NewCall, text_hit: bool) -> bool:
        """Whether the call's tokens must be decoded: its text held a secret, or there is no text to tell
        (a completion cut short or failed mid-stream has tokens but no answer; a completions prompt given
        as token IDs)."""
        if self._re is None:
            return False
        if text_hit or self.tokenizer is None:  # without a tokenizer the text is all there is to tell
            return text_hit
        if (call.response is None or call.status != CallStatus.OK) and any(c.token_ids for c in call.choices):
            return True  # sampled tokens whose text never made it into a response (cut short, failed)
        prompt = call.request.get("prompt") if isinstance(call.request, dict) else None
        return isinstance(prompt, list) and any(not isinstance(p, str) for p in prompt)

    def scrub(self, call: NewCall) -> dict[str, Any] | None:
        """Replace the call's secret tokens in place of its arrays; returns the ``redacted`` marker
        (None when nothing was found). The call's lists are replaced, never mutated."""
        if not call.prompt_token_ids and not any(c.token_ids for c in call.choices):
            return None
        if self.tokenizer is None:
            return self._drop(call, "no tokenizer for this engine's tokens: set [gateway.render] tokenizer")
        arrays = _Arrays(list(call.prompt_token_ids), [list(c.token_ids) for c in call.choices],
                         [], [[] for _ in call.choices])
        try:
            clean = self._scrub_arrays(arrays)
        except Exception as exc:  # noqa: BLE001 - a tokenizer failure must not store the secret
            log.warning("token redaction failed (%s: %s); the call's token arrays are not stored",
                        type(exc).__name__, exc)
            clean = False
        if not clean:
            return self._drop(call, "secret tokens could not be located")
        n_prompt = _count(arrays.prompt_spans)
        n_choices = [_count(s) for s in arrays.choice_spans]
        if not n_prompt and not any(n_choices):
            return None
        call.prompt_token_ids = arrays.prompt
        call.choices = [ChoiceTokens(ids, list(c.logprobs), c.finish_reason)
                        for ids, c in zip(arrays.choices, call.choices, strict=True)]
        self._scrub_json(call)
        return {"tokens": n_prompt + sum(n_choices), "prompt": n_prompt, "completion": n_choices,
                "prompt_spans": [list(s) for s in arrays.prompt_spans],
                "completion_spans": [[list(s) for s in spans] for spans in arrays.choice_spans],
                "placeholder": self.placeholder}

    def _drop(self, call: NewCall, why: str) -> dict[str, Any]:
        n_prompt = len(call.prompt_token_ids)
        n_choices = [len(c.token_ids) for c in call.choices]
        call.prompt_token_ids = []
        call.choices = [ChoiceTokens([], [], c.finish_reason) for c in call.choices]
        self._scrub_json(call)
        return {"tokens": n_prompt + sum(n_choices), "prompt": n_prompt, "completion": n_choices,
                "dropped": True, "why": why}

    def _scrub_json(self, call: NewCall) -> None:
        """Per-token data in the stored request/response (logprob token strings and bytes, token ID
        lists) would spell the secret too: a redacted call keeps them only in its (scrubbed) arrays."""
        call.response = without_fields(call.response, TOKEN_FIELDS)
        if isinstance(call.request, dict) and isinstance(call.request.get("prompt"), list):
            prompt = call.request["prompt"]
            if any(not isinstance(p, str) for p in prompt):  # token IDs: never stored as sent
                call.request = {**call.request, "prompt": REPLACEMENT}

    # -- finding tokens -------------------------------------------------------------------------------
    def _scrub_arrays(self, a: _Arrays) -> bool:
        """Replace matches until every view of the arrays decodes clean (True), or give up (False).

        Byte-level vocabularies are searched on the tokens' exact bytes (no decoding); the text the
        tokenizer decodes is then checked once, and anything it still shows is found the slow way."""
        if self._byte_level and self._rounds(a, self._byte_spans) and not self._rounds(a, self.spans, 1):
            return True
        return self._rounds(a, self.spans, MAX_ROUNDS)

    def _rounds(self, a: _Arrays, finder: Any, rounds: int = MAX_ROUNDS) -> bool:
        """Up to ``rounds`` passes of ``finder`` over every view, replacing what it finds; True when a
        whole pass found nothing."""
        for _ in range(rounds):
            found = False
            views: list[tuple[int | None, bool]] = [(i, True) for i in range(len(a.choices))]
            views += [(None, True)] + [(i, False) for i in range(len(a.choices))]
            for choice, with_prompt in views:
                ids = (a.prompt if with_prompt else []) + (a.choices[choice] if choice is not None else [])
                spans = finder(ids)
                if not spans:
                    continue
                found = True
                offset = len(a.prompt) if with_prompt else 0
                for s, e in spans:
                    if with_prompt and s < offset:
                        _replace(a.prompt, a.prompt_spans, s, min(e, offset), self.placeholder)
                    if choice is not None and e > offset:
                        _replace(a.choices[choice], a.choice_spans[choice], max(s - offset, 0), e - offset,
                                 self.placeholder)
            if not found:
                return True
        return False

    def _decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        if self._backend is not None:
            return self._backend.decode(list(ids), skip_special_tokens=skip_special)
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special, clean_up_tokenization_spaces=False)

    def spans(self, ids: Sequence[int]) -> list[Span]:
        """Token spans ``[start, end)`` of ``ids`` whose decoded text overlaps a match (empty when none
        does), found by decoding prefixes: right for any tokenizer."""
        assert self._re is not None
        if not ids:
            return []
        text = self._decode(ids)
        matches = [(m.start(), m.end()) for m in self._re.finditer(text) if m.end() > m.start()]
        if not matches:
            if self._special.isdisjoint(ids):
                return []
            special_free = self._decode(ids, skip_special=True)
            if special_free != text and self._re.search(special_free):
                return [(0, len(ids))]  # a match only once special tokens are skipped: rare, be blunt
            return []
        return self._char_spans(ids, matches)

    def _byte_spans(self, ids: Sequence[int]) -> list[Span]:
        """Byte-level BPE: each token's exact bytes (cached per id), searched with the patterns as bytes."""
        assert self._re_bytes is not None
        if not ids:
            return []
        cache = self._pieces
        missing = [i for i in set(ids).difference(cache.keys())]
        if missing:
            for tid, tok in zip(missing, self.tokenizer.convert_ids_to_tokens(missing), strict=True):
                cache[tid] = b"".join(bytes([BYTE_OF[c]]) if c in BYTE_OF else c.encode()
                                      for c in tok or "")
        pieces = list(map(cache.__getitem__, ids))
        data = b"".join(pieces)
        found = [(m.start(), m.end()) for m in self._re_bytes.finditer(data) if m.end() > m.start()]
        if not found:
            return []
        ends = list(itertools.accumulate(map(len, pieces)))
        return [(bisect.bisect_right(ends, s), bisect.bisect_left(ends, e) + 1) for s, e in found]

    def _char_spans(self, ids: Sequence[int], matches: list[Span]) -> list[Span]:
        """Any tokenizer: token boundaries found by decoding prefixes (binary search per match)."""
        cache: dict[int, int] = {0: 0, len(ids): len(self._decode(ids))}

        def plen(k: int) -> int:
            if k not in cache:
                cache[k] = len(self._decode(ids[:k]))
            return cache[k]

        spans = []
        for start, end in matches:
            lo, hi = 0, len(ids)  # the last k with plen(k) <= start: the token at k holds the match's start
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if plen(mid) <= start:
                    lo = mid
                else:
                    hi = mid - 1
            first = min(lo, len(ids) - 1)
            lo, hi = first + 1, len(ids)  # the first k with plen(k) >= end: tokens before k hold the end
            while lo < hi:
                mid = (lo + hi) // 2
                if plen(mid) >= end:
                    hi = mid
                else:
                    lo = mid + 1
            spans.append((first, lo))
        return spans


def _special_ids(tokenizer: Any, backend: Any) -> frozenset[int]:
    """Ids a ``skip_special_tokens`` decode leaves out (checked: a key split by one is still a key)."""
    if tokenizer is None:
        return frozenset()
    ids = set(getattr(tokenizer, "all_special_ids", None) or ())
    try:
        ids |= {int(i) for i, t in backend.get_added_tokens_decoder().items() if getattr(t, "special", False)}
    except Exception:  # noqa: BLE001 - not a Rust tokenizer: the transformers list above
        pass
    return frozenset(ids)


def _replace(ids: list[int], spans: list[Span], start: int, end: int, placeholder: int) -> None:
    if end <= start:
        return
    for i in range(start, min(end, len(ids))):
        ids[i] = placeholder
    spans.append((start, min(end, len(ids))))
    spans.sort()
    merged: list[Span] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    spans[:] = merged


def _count(spans: list[Span]) -> int:
    return sum(e - s for s, e in spans)


def redacted_positions(marker: dict[str, Any] | None, choice: int | None) -> set[int]:
    """Positions replaced in the prompt (``choice`` None) or in one choice's completion, from a marker."""
    if not marker:
        return set()
    if choice is None:
        spans = marker.get("prompt_spans") or []
    else:
        all_spans = marker.get("completion_spans") or []
        spans = all_spans[choice] if choice < len(all_spans) else []
    return {i for s, e in spans for i in range(int(s), int(e))}


def scrub_sample(redactor: TokenRedactor, sample: Any) -> Any:
    """A training ``Sample`` with any token run that still decodes to a match replaced, untrained, and
    counted in ``redacted`` -- for readers of a store recorded before token redaction, or with weaker
    patterns (``harnessrl export``). Returns the sample itself when nothing matched."""
    import dataclasses

    arrays = _Arrays(list(sample.token_ids), [], [], [])
    if not redactor._rounds(arrays, redactor._byte_spans if redactor._byte_level else redactor.spans) or (
            redactor._byte_level and not redactor._rounds(arrays, redactor.spans)):
        arrays.prompt = [redactor.placeholder] * len(arrays.prompt)  # cannot be located: nothing readable
        arrays.prompt_spans = [(0, len(arrays.prompt))]
    changed = [i for s, e in arrays.prompt_spans for i in range(s, e) if sample.token_ids[i] != arrays.prompt[i]]
    if not changed:
        return sample
    hidden = {i for s, e in arrays.prompt_spans for i in range(s, e)}
    return dataclasses.replace(
        sample, token_ids=arrays.prompt,
        loss_mask=[0 if i in hidden else m for i, m in enumerate(sample.loss_mask)],
        behaviour_logprobs=[0.0 if i in hidden else lp for i, lp in enumerate(sample.behaviour_logprobs)],
        redacted=sample.redacted + len(changed))
