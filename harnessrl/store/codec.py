"""How calls become rows: compact token arrays and the prefix search that keeps storage linear.

Token IDs are little-endian int32, logprobs little-endian float32: 4 bytes per token, a fixed layout
that SQLite BLOB and PostgreSQL BYTEA both hold and numpy can read without copying. zlib is not used:
token IDs are near-random 17-18 bit values and gain little, while it would cost CPU on the hot path.
Logprobs are stored as float32 (what trainers compute in), so they round-trip to about 1e-7 relative.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from harnessrl.store.base import NewCall, StoreError
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens, Fidelity

_BIG_ENDIAN = sys.byteorder == "big"

#: Bytes per stored token ID and per stored logprob.
ITEM_SIZE = 4


def encode_ids(ids: Sequence[int]) -> bytes:
    """int32 little-endian bytes of token IDs (``ValueError`` for anything else)."""
    try:
        return struct.pack(f"<{len(ids)}i", *ids)  # about 2x faster than array() on long lists
    except struct.error as exc:
        raise ValueError(f"token IDs must be int32 values: {exc}") from None


def decode_ids(data: bytes) -> list[int]:
    arr = array("i")
    arr.frombytes(data)
    if _BIG_ENDIAN:
        arr.byteswap()
    return arr.tolist()


def encode_floats(values: Sequence[float]) -> bytes:
    try:
        return struct.pack(f"<{len(values)}f", *values)
    except struct.error as exc:
        raise ValueError(f"logprobs must be float values: {exc}") from None


def decode_floats(data: bytes) -> list[float]:
    arr = array("f")
    arr.frombytes(data)
    if _BIG_ENDIAN:
        arr.byteswap()
    return arr.tolist()


def common_prefix_tokens(a: bytes, b: bytes) -> int:
    """Number of leading tokens two encoded ID arrays share (memcmp speed, no Python loop per token)."""
    n = min(len(a), len(b))
    if b.startswith(a) if len(a) <= len(b) else a.startswith(b):
        return n // ITEM_SIZE
    x = np.frombuffer(a, dtype=np.uint8, count=n)
    y = np.frombuffer(b, dtype=np.uint8, count=n)
    first_diff = int(np.flatnonzero(x != y)[0])
    return first_diff // ITEM_SIZE


def best_parent(prompt: bytes, candidates: Sequence[tuple[int, bytes]]) -> tuple[int | None, int]:
    """Pick the candidate ``(call index, full sequence)`` sharing the longest prefix with ``prompt``.

    Returns ``(call index or None, prefix length in tokens)``. Candidates are tried newest first and one
    that cannot beat the best so far is skipped, so a plain multi-turn chain costs one memcmp per call.
    Ties go to the newest call.
    """
    best_index: int | None = None
    best_len = 0
    for index, full in reversed(candidates):
        if len(full) // ITEM_SIZE <= best_len:
            continue
        shared = common_prefix_tokens(prompt, full)
        if shared > best_len:
            best_index, best_len = index, shared
    return best_index, best_len


# -- calls <-> rows ---------------------------------------------------------------------------------------

#: Column order of the ``calls`` table as the drivers insert and select it.
CALL_COLUMNS = (
    "rollout_id", "call_index", "api", "status", "request", "response", "parent_index", "prefix_len",
    "prompt_len", "prompt_suffix", "completion_ids", "completion_logprobs", "choices", "policy_version",
    "requested_model", "sampling", "engine_id", "latency_s", "error", "fidelity", "fidelity_reason",
    "created_at",
)  # fmt: skip


class RowLike(Protocol):
    """A result row addressable by column name (``sqlite3.Row``, psycopg's ``dict_row``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


@dataclass(slots=True)
class RolloutSeqs:
    """What the write path must know of a rollout's earlier calls, kept in memory between batches.

    ``leaves`` holds ``(call index, prompt + choice-0 completion)`` of the calls whose sequence is not
    the prefix of a later call's: a call extended by a later one can never share a longer prefix with a
    new prompt than its extension does, so a plain multi-turn chain keeps a single sequence.
    """

    next_index: int = 0
    leaves: list[tuple[int, bytes]] = field(default_factory=list)

    def copy(self) -> RolloutSeqs:
        return RolloutSeqs(self.next_index, list(self.leaves))

    def nbytes(self) -> int:
        return sum(len(full) for _, full in self.leaves)

    def add(self, index: int, full: bytes, parent: int | None, prefix_len: int) -> None:
        """Record call ``index``; drop its parent if ``full`` extends it, skip it if the parent covers it."""
        self.next_index = index + 1
        if parent is not None:
            for pos, (i, parent_full) in enumerate(self.leaves):
                if i != parent:
                    continue
                if len(parent_full) == prefix_len * ITEM_SIZE:
                    del self.leaves[pos]  # extended: the new call shares at least as much with anything
                elif parent_full.startswith(full):
                    return  # a resend of an earlier prompt whose completion the parent already has
                break
        if full:
            self.leaves.append((index, full))


class SeqCache:
    """LRU of ``RolloutSeqs`` bounded by bytes, so the hot path never re-reads a rollout's tokens."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[RolloutSeqs, int]] = OrderedDict()
        self._bytes = 0

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


def encode_call(call: NewCall, seqs: RolloutSeqs, now: float) -> tuple[Any, ...]:
    """The ``calls`` row (in ``CALL_COLUMNS`` order) for ``call``; advances ``seqs`` past it."""
    index = seqs.next_index
    prompt = encode_ids(call.prompt_token_ids)
    parent, prefix_len = best_parent(prompt, seqs.leaves)
    ids = [encode_ids(c.token_ids) for c in call.choices]
    meta = [[len(c.token_ids), len(c.logprobs), c.finish_reason] for c in call.choices]
    seqs.add(index, prompt + ids[0] if ids else prompt, parent, prefix_len)
    return (
        call.rollout_id, index, str(call.api), str(call.status), _dumps(call.request),
        None if call.response is None else _dumps(call.response), parent, prefix_len,
        len(call.prompt_token_ids), prompt[prefix_len * ITEM_SIZE :], b"".join(ids),
        b"".join(encode_floats(c.logprobs) for c in call.choices), _dumps(meta), call.policy_version,
        call.requested_model, _dumps(call.sampling), call.engine_id, call.latency_s, call.error,
        None if call.fidelity is None else str(call.fidelity), call.fidelity_reason, now,
    )  # fmt: skip


def _choice0_ids(row: RowLike) -> bytes:
    meta = orjson.loads(row["choices"])
    return bytes(row["completion_ids"][: meta[0][0] * ITEM_SIZE]) if meta else b""


def replay(rows: Iterable[RowLike]) -> Iterator[tuple[RowLike, bytes, bytes]]:
    """Rebuild full prompts from rows in call order: yields ``(row, prompt, prompt + choice-0 tokens)``.

    Each row is read once and each prompt built by one slice and one join, so reading a rollout costs
    the size of its output, never a re-read per turn. A row's parent must come earlier in ``rows``.
    """
    fulls: dict[int, bytes] = {}
    for row in rows:
        parent = row["parent_index"]
        prefix = fulls[parent][: row["prefix_len"] * ITEM_SIZE] if parent is not None else b""
        prompt = prefix + bytes(row["prompt_suffix"])
        if len(prompt) != row["prompt_len"] * ITEM_SIZE:
            raise StoreError(
                f"call {row['call_index']}: rebuilt prompt has the wrong length; database damaged?"
            )
        full = prompt + _choice0_ids(row)
        fulls[row["call_index"]] = full
        yield row, prompt, full


def decode_call(row: RowLike, prompt: bytes) -> Call:
    ids, logprobs = bytes(row["completion_ids"]), bytes(row["completion_logprobs"])
    choices, id_at, lp_at = [], 0, 0
    for n_ids, n_lps, finish in orjson.loads(row["choices"]):
        choices.append(
            ChoiceTokens(
                decode_ids(ids[id_at : id_at + n_ids * ITEM_SIZE]),
                decode_floats(logprobs[lp_at : lp_at + n_lps * ITEM_SIZE]),
                finish,
            )
        )
        id_at, lp_at = id_at + n_ids * ITEM_SIZE, lp_at + n_lps * ITEM_SIZE
    response = row["response"]
    return Call(
        rollout_id=row["rollout_id"],
        index=row["call_index"],
        api=ApiKind(row["api"]),
        status=CallStatus(row["status"]),
        request=orjson.loads(row["request"]),
        response=None if response is None else orjson.loads(response),
        prompt_token_ids=decode_ids(prompt),
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
    )
