"""Calls to ``calls`` rows and back, shared by the drivers; ``schema.py`` documents the columns.

Writing a call needs the rollout's earlier sequences (to find the parent its prompt extends). They are
kept in memory between batches (``SeqCache``), so the hot path never re-reads a rollout's tokens;
reading replays a rollout's rows once, in order, so no prompt is ever rebuilt from a re-read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from harnessrl.store.base import NewCall, StoreError
from harnessrl.store.codec import (
    ITEM_SIZE,
    RequestShape,
    best_parent,
    compact_request,
    decode_floats,
    decode_ids,
    encode_floats,
    encode_ids,
    expand_request,
    request_shape,
)
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens, Fidelity

#: Column order of the ``calls`` table as the drivers insert and select it.
CALL_COLUMNS = (
    "rollout_id", "call_index", "api", "status", "request", "request_keep", "response", "parent_index",
    "prefix_len", "prompt_len", "prompt_suffix", "completion_ids", "completion_logprobs", "choices",
    "policy_version", "requested_model", "sampling", "engine_id", "latency_s", "error", "fidelity",
    "fidelity_reason", "created_at", "purged_at", "response_elided",
)  # fmt: skip

#: The columns a driver must read to rebuild ``RolloutSeqs`` after a cache miss.
SEQ_COLUMNS = (
    "call_index", "parent_index", "prefix_len", "prompt_len", "prompt_suffix", "completion_ids", "choices",
    "request", "request_keep", "purged_at",
)  # fmt: skip


class RowLike(Protocol):
    """A result row addressable by column name (``sqlite3.Row``, psycopg's ``dict_row``)."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Leaf:
    """An earlier call a new one may extend: prompt + choice-0 completion IDs, and its full request."""

    index: int
    full: bytes
    request: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SeqLeaf:
    """A leaf as the write path keeps it between batches: the request as a ``RequestShape`` only."""

    index: int
    full: bytes
    shape: RequestShape

    def nbytes(self) -> int:
        return LEAF_OVERHEAD + len(self.full) + self.shape.nbytes()


#: Bytes a kept leaf costs besides its tokens and shape (the objects themselves), for cache accounting.
LEAF_OVERHEAD = 160
#: Leaves kept per rollout, most recently extended last. A rollout that interleaves more conversations
#: (a main agent and its sub-agents) loses only compaction: a call extending a dropped leaf stores its
#: prompt against the best remaining one, once, and becomes a leaf itself.
MAX_LEAVES = 4


@dataclass(slots=True)
class RolloutSeqs:
    """What the write path must know of a rollout's earlier calls.

    ``leaves`` are the calls whose sequence is not the prefix of a later call's: a call extended by a
    later one can never share a longer prefix with a new prompt than its extension does, so a plain
    multi-turn chain keeps a single leaf. At most ``MAX_LEAVES`` are kept.
    """

    next_index: int = 0
    leaves: list[SeqLeaf] = field(default_factory=list)

    def copy(self) -> RolloutSeqs:
        return RolloutSeqs(self.next_index, list(self.leaves))

    def nbytes(self) -> int:
        """Memory held, tokens and request shapes together (what ``SeqCache`` bounds)."""
        return sum(leaf.nbytes() for leaf in self.leaves)

    def add(self, leaf: SeqLeaf, parent: int | None, prefix_len: int) -> None:
        """Record a call; drop its parent if it extends the parent, skip it if the parent covers it."""
        self.next_index = leaf.index + 1
        for pos, other in enumerate(self.leaves):
            if other.index != parent:
                continue
            if len(other.full) == prefix_len * ITEM_SIZE:
                del self.leaves[pos]  # extended: the new call shares at least as much with any prompt
            elif other.full.startswith(leaf.full):
                return  # a resend of an earlier prompt whose completion the parent already holds
            break
        if leaf.full:
            self.leaves.append(leaf)
            if len(self.leaves) > MAX_LEAVES:
                del self.leaves[0]


class SeqCache:
    """LRU of ``RolloutSeqs`` bounded by the bytes they hold (tokens, request shapes, object overhead)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[RolloutSeqs, int]] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, rollout_id: str) -> RolloutSeqs | None:
        entry = self._entries.get(rollout_id)
        if entry is None:
            return None
        self._entries.move_to_end(rollout_id)
        return entry[0]

    def put(self, rollout_id: str, seqs: RolloutSeqs) -> None:
        self.discard(rollout_id)
        size = seqs.nbytes()
        self._entries[rollout_id] = (seqs, size)
        self._bytes += size
        while self._bytes > self.max_bytes and self._entries:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted

    def discard(self, rollout_id: str) -> None:
        entry = self._entries.pop(rollout_id, None)
        if entry is not None:
            self._bytes -= entry[1]


def dumps(obj: Any) -> str:
    """JSON as text, the form of every document column."""
    return orjson.dumps(obj).decode()


def encode_call(call: NewCall, seqs: RolloutSeqs, now: float) -> tuple[Any, ...]:
    """The ``calls`` row (in ``CALL_COLUMNS`` order) for ``call``; advances ``seqs`` past it."""
    index = seqs.next_index
    prompt = call.prompt_bytes()
    if prompt is None:
        prompt = encode_ids(call.prompt_token_ids)
    parent, prefix_len = best_parent(prompt, seqs.leaves)
    parent_index = parent.index if parent else None
    shape = request_shape(call.request)
    request, keep = compact_request(call.request, parent.shape if parent else None, shape)
    ids = [encode_ids(c.token_ids) for c in call.choices]
    meta = [[len(c.token_ids), len(c.logprobs), c.finish_reason] for c in call.choices]
    seqs.add(SeqLeaf(index, prompt + ids[0] if ids else prompt, shape), parent_index, prefix_len)
    response, elided = elide_prompt(call.response, call.prompt_token_ids)
    return (
        call.rollout_id, index, str(call.api), str(call.status), dumps(request), dumps(keep) if keep else None,
        None if response is None else dumps(response), parent_index, prefix_len,
        len(call.prompt_token_ids), prompt[prefix_len * ITEM_SIZE :], b"".join(ids),
        b"".join(encode_floats(c.logprobs) for c in call.choices), dumps(meta), call.policy_version,
        call.requested_model, dumps(call.sampling), call.engine_id, call.latency_s, call.error,
        None if call.fidelity is None else str(call.fidelity), call.fidelity_reason, now, None,
        dumps(elided) if elided else None,
    )  # fmt: skip


def elide_prompt(response: Any, prompt: list[int]) -> tuple[Any, list[list[str | int]]]:
    """``response`` without the copies of the call's prompt token IDs it holds (top level, as in chat, or per
    choice, as in completions), and their paths: the stored prompt is the one copy. The response is shallow-
    copied where something is left out, never changed."""
    if not isinstance(response, dict) or not prompt:
        return response, []
    paths: list[list[str | int]] = []
    if _is_prompt(response.get("prompt_token_ids"), prompt):
        response = {k: v for k, v in response.items() if k != "prompt_token_ids"}
        paths.append(["prompt_token_ids"])
    choices = response.get("choices")
    if isinstance(choices, list) and any(isinstance(c, dict) and _is_prompt(c.get("prompt_token_ids"), prompt)
                                         for c in choices):
        kept = []
        for i, c in enumerate(choices):
            if isinstance(c, dict) and _is_prompt(c.get("prompt_token_ids"), prompt):
                c = {k: v for k, v in c.items() if k != "prompt_token_ids"}
                paths.append(["choices", i, "prompt_token_ids"])
            kept.append(c)
        response = {**response, "choices": kept}
    return response, paths


def _is_prompt(value: Any, prompt: list[int]) -> bool:
    return value is prompt or (type(value) is list and len(value) == len(prompt) and value == prompt)


def restore_prompt(response: Any, paths: list[list[Any]], prompt: list[int]) -> Any:
    """The stored response with the prompt's token IDs back where ``elide_prompt`` took them out."""
    for path in paths:
        at = response
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = list(prompt)
    return response


def seq_leaf(leaf: Leaf) -> SeqLeaf:
    """A replayed leaf as the write path keeps it."""
    return SeqLeaf(leaf.index, leaf.full, request_shape(leaf.request))


def replay(rows: Iterable[RowLike]) -> Iterator[tuple[RowLike, bytes, Leaf]]:
    """Rebuild prompts and requests from rows in call order: yields ``(row, prompt, leaf)``.

    Each row is read once and each prompt built by one slice and one join, so reading a rollout costs
    the size of its output. A row's parent must come earlier in ``rows``. A purged row yields an empty
    prompt and request (retention purges a rollout's calls together, so no kept call extends one).
    """
    built: dict[int, Leaf] = {}
    purged: set[int] = set()
    for row in rows:
        if row["purged_at"] is not None:
            purged.add(row["call_index"])
            leaf = built[row["call_index"]] = Leaf(row["call_index"], b"", {})
            yield row, b"", leaf
            continue
        if row["parent_index"] in purged:
            raise StoreError(f"call {row['call_index']} extends call {row['parent_index']}, which was purged")
        parent = built.get(row["parent_index"]) if row["parent_index"] is not None else None
        prefix = parent.full[: row["prefix_len"] * ITEM_SIZE] if parent else b""
        prompt = prefix + bytes(row["prompt_suffix"])
        if len(prompt) != row["prompt_len"] * ITEM_SIZE or (row["parent_index"] is not None and not parent):
            raise StoreError(f"call {row['call_index']}: its prompt cannot be rebuilt; database damaged?")
        meta = orjson.loads(row["choices"])
        full = prompt + bytes(row["completion_ids"][: meta[0][0] * ITEM_SIZE]) if meta else prompt
        keep = orjson.loads(row["request_keep"]) if row["request_keep"] else {}
        request = expand_request(orjson.loads(row["request"]), keep, parent.request if parent else None)
        leaf = built[row["call_index"]] = Leaf(row["call_index"], full, request)
        yield row, prompt, leaf


def decode_call(row: RowLike, prompt: bytes, request: dict[str, Any]) -> Call:
    """The ``Call`` of a row; a purged one keeps its metadata and each choice's finish reason only."""
    ids, logprobs = bytes(row["completion_ids"]), bytes(row["completion_logprobs"])
    choices, id_at, lp_at = [], 0, 0
    for n_ids, n_lps, finish in orjson.loads(row["choices"]):
        id_end, lp_end = id_at + n_ids * ITEM_SIZE, lp_at + n_lps * ITEM_SIZE
        choices.append(
            ChoiceTokens(decode_ids(ids[id_at:id_end]), decode_floats(logprobs[lp_at:lp_end]), finish)
        )
        id_at, lp_at = id_end, lp_end
    prompt_ids = decode_ids(prompt)
    response = None if row["response"] is None else orjson.loads(row["response"])
    if response is not None and row["response_elided"]:
        response = restore_prompt(response, orjson.loads(row["response_elided"]), prompt_ids)
    return Call(
        rollout_id=row["rollout_id"],
        index=row["call_index"],
        api=ApiKind(row["api"]),
        status=CallStatus(row["status"]),
        request=request,
        response=response,
        prompt_token_ids=prompt_ids,
        choices=choices,
        policy_version=row["policy_version"],
        requested_model=row["requested_model"],
        sampling=orjson.loads(row["sampling"]),
        engine_id=row["engine_id"],
        latency_s=row["latency_s"],
        error=row["error"],
        fidelity=None if row["fidelity"] is None else Fidelity(row["fidelity"]),
        fidelity_reason=row["fidelity_reason"],
        created_at=row["created_at"],
        purged_at=row["purged_at"],
    )
