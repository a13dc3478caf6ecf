"""Compact token arrays, and the prefix searches that keep a rollout's storage linear in its turns.

Token IDs are little-endian int32, logprobs little-endian float32: 4 bytes per token, a fixed layout
that SQLite BLOB and PostgreSQL BYTEA both hold and numpy can read without copying. zlib is not used:
token IDs are near-random 17-18 bit values and gain little, while it would cost CPU on the hot path.
Logprobs are stored as float32 (what trainers compute in), so they round-trip to about 1e-7 relative.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import orjson

from harnessrl.store.base import StoreError

C = TypeVar("C", bound="Candidate")
_BIG_ENDIAN = sys.byteorder == "big"

#: Bytes per stored token ID and per stored logprob.
ITEM_SIZE = 4


def encode_ids(ids: Sequence[int]) -> bytes:
    """int32 little-endian bytes of token IDs (``ValueError`` for anything else)."""
    try:
        return struct.pack(f"<{len(ids)}i", *ids)  # about 2x faster than array() on long lists
    except struct.error as exc:
        raise ValueError(f"token IDs must be int32 values: {exc}") from None


def prepacked(ids: list[int], packed: array | None) -> tuple[list[int], bytes] | None:
    """``(ids, encode_ids(ids))`` from an int32 array of ``ids`` a caller packed already (the gateway's
    prefix check packs every prompt), or None where the array is not the stored form (int64, big-endian)."""
    if packed is None or packed.typecode != "i" or packed.itemsize != ITEM_SIZE or _BIG_ENDIAN:
        return None
    return ids, packed.tobytes()


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


class Candidate(Protocol):
    """An earlier call that a new prompt may extend: its index and prompt + choice-0 completion IDs."""

    @property
    def index(self) -> int: ...

    @property
    def full(self) -> bytes: ...


def best_parent(prompt: bytes, candidates: Sequence[C]) -> tuple[C | None, int]:
    """Pick the candidate sharing the longest prefix with ``prompt``: ``(candidate or None, tokens)``.

    Candidates are tried newest first and one that cannot beat the best so far is skipped, so a plain
    multi-turn chain costs one memcmp per call. Ties go to the newest call.
    """
    best: C | None = None
    best_len = 0
    for candidate in reversed(candidates):
        if len(candidate.full) // ITEM_SIZE <= best_len:
            continue
        shared = common_prefix_tokens(prompt, candidate.full)
        if shared > best_len:
            best, best_len = candidate, shared
    return best, best_len


# -- request documents ----------------------------------------------------------------------------------
# A harness resends its whole history each turn, so requests grow like prompts do. A top-level list
# (``messages``, ``input``) or long string (``prompt``) that starts with the parent call's is stored as
# its new part plus ``keep[key]``, the number of items (or characters) taken from the parent. The write
# path compares against the parent's ``RequestShape`` (digests), not its request: the shape is what the
# store keeps in memory per rollout, a few bytes per message instead of the message itself.

_MIN_STRING_DELTA = 256
_DIGEST = 16
#: Bytes a ``RequestShape`` costs besides its digests (objects, dict slots), for cache accounting.
SHAPE_OVERHEAD = 256


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


def _str_digest(value: str) -> bytes:
    return _digest(value.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class RequestShape:
    """What ``compact_request`` needs of a parent request: for each top-level list, one 16-byte digest of
    each item's JSON (concatenated); for each string of at least 256 characters, its length and digest.
    JSON, not Python equality: Python's == takes 1 == 1.0 == True, which would change the record."""

    lists: dict[str, bytes]
    strings: dict[str, tuple[int, bytes]]

    def nbytes(self) -> int:
        return SHAPE_OVERHEAD + sum(len(d) + 64 for d in self.lists.values()) + 96 * len(self.strings)


def request_shape(request: dict[str, Any]) -> RequestShape:
    lists: dict[str, bytes] = {}
    strings: dict[str, tuple[int, bytes]] = {}
    for key, value in request.items():
        if isinstance(value, list):
            lists[key] = b"".join(_digest(orjson.dumps(item)) for item in value)
        elif isinstance(value, str) and len(value) >= _MIN_STRING_DELTA:
            strings[key] = (len(value), _str_digest(value))
    return RequestShape(lists, strings)


def _common_items(a: bytes, b: bytes) -> int:
    """Leading digests two concatenated digest strings share."""
    n = min(len(a), len(b)) // _DIGEST
    if a[: n * _DIGEST] == b[: n * _DIGEST]:
        return n
    return next(i for i in range(n) if a[i * _DIGEST : (i + 1) * _DIGEST] != b[i * _DIGEST : (i + 1) * _DIGEST])


def compact_request(
    request: dict[str, Any], parent: RequestShape | None, shape: RequestShape | None = None
) -> tuple[dict[str, Any], dict[str, int]]:
    """``(request without what the parent already has, keep)``; ``expand_request`` inverts it.
    ``shape``: ``request_shape(request)`` when the caller has it already."""
    if parent is None or not (parent.lists or parent.strings):
        return request, {}
    shape = shape or request_shape(request)
    stored, keep = dict(request), {}
    for key, value in request.items():
        if key in shape.lists and key in parent.lists:
            n = _common_items(shape.lists[key], parent.lists[key])
        elif isinstance(value, str) and key in parent.strings:
            length, digest = parent.strings[key]
            n = length if len(value) >= length and _str_digest(value[:length]) == digest else 0
        else:
            continue
        if n:
            stored[key], keep[key] = value[n:], n
    return stored, keep


def expand_request(
    stored: dict[str, Any], keep: dict[str, int], parent: dict[str, Any] | None
) -> dict[str, Any]:
    if not keep:
        return stored
    if parent is None:
        raise StoreError("a call's request refers to a parent call that is missing; database damaged?")
    request = dict(stored)
    for key, n in keep.items():
        request[key] = parent[key][:n] + stored[key]
    return request
