"""How a call's prompt relates to the rollout's earlier calls (engine render mode).

In engine mode the engine applies the chat template, so the gateway can only observe whether the prompt
it got back starts with an earlier call's prompt+completion, token for token. The training side merges
calls only when that holds; recording the verdict per call makes template drift visible.

What a live rollout keeps for the check is ``PromptHistory``: the latest sequence packed (4 bytes a token:
where a new prompt departs from it is the reason recorded) and the earlier few as length + digest only,
so an open rollout's memory is one context, not several lists of Python ints.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

from harnessrl.types import Fidelity

#: Earlier prompt+completion sequences checked against a new prompt (the latest and three before it).
KEEP = 4


def _pack(ids: Sequence[int]) -> bytes:
    """Token ids as 8-byte machine integers (one format, so digests of any two sequences compare)."""
    return array("q", ids).tobytes()


def _digest(packed: bytes) -> bytes:
    return hashlib.blake2b(packed, digest_size=16).digest()


class PromptHistory:
    """A rollout's last ``keep`` prompt+completion sequences, as the prefix check needs them.

    The latest is kept as int32 (int64 when an id does not fit) bytes; the ones before it as
    ``(tokens, digest)``. ``append`` and ``clear`` behave like a bounded deque of sequences.
    """

    __slots__ = ("_keep", "_latest", "_older")

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._latest: array | None = None
        self._older: list[tuple[int, bytes]] = []  # oldest first; a list: a deque's block is 600 bytes

    def append(self, seq: Sequence[int]) -> None:
        if self._latest is not None and self._keep > 1:
            self._older.append((len(self._latest), _digest(_pack(self._latest))))
            del self._older[: -(self._keep - 1)]
        try:
            self._latest = array("i", seq)
        except OverflowError:
            self._latest = array("q", seq)

    def clear(self) -> None:
        self._latest = None
        self._older.clear()

    def __len__(self) -> int:
        return 0 if self._latest is None else 1 + len(self._older)

    def nbytes(self) -> int:
        """Bytes held (token data and digests; the containers add a few hundred)."""
        latest = 0 if self._latest is None else len(self._latest) * self._latest.itemsize
        return latest + 16 * len(self._older)

    def classify(self, prompt: Sequence[int]) -> tuple[Fidelity, str | None]:
        if self._latest is None:
            return Fidelity.RERENDERED, "first call of the rollout"
        latest = self._latest
        n, m = len(prompt), len(latest)
        try:
            mine = array(latest.typecode, prompt)
        except OverflowError:  # an id past int32 where the latest fitted: compare as int64
            mine, latest = array("q", prompt), array("q", latest)
        if m <= n and mine[:m] == latest:
            return (Fidelity.EXACT, None) if m == n else (Fidelity.EXTENDED, None)
        packed = _pack(prompt)
        for length, digest in reversed(self._older):
            if length <= n and _digest(packed[: 8 * length]) == digest:
                return (Fidelity.EXACT, None) if length == n else (Fidelity.EXTENDED, None)
        # Where the most recent candidate diverges says most about what the harness changed.
        at = _first_difference(mine.tobytes(), latest.tobytes(), latest.itemsize)
        return Fidelity.RERENDERED, f"no earlier prompt+completion is a prefix (the latest differs at token {at})"


def classify_prompt(
    prompt: Sequence[int], earlier: PromptHistory | Sequence[Sequence[int]]
) -> tuple[Fidelity, str | None]:
    """Classify ``prompt`` against earlier prompt+completion sequences (most recent last).

    ``exact`` when it equals one of them, ``extended`` when one of them is a proper prefix, otherwise
    ``rerendered`` with a reason (first call, or where the most recent candidate first differs).
    """
    if not isinstance(earlier, PromptHistory):
        history = PromptHistory(keep=len(earlier))
        for seq in earlier:
            history.append(seq)
        earlier = history
    return earlier.classify(prompt)


def _first_difference(a: bytes, b: bytes, size: int) -> int:
    """Index of the first token where packed ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n // size
    lo, hi = 0, n // size  # binary search over the packed bytes: memcmp speed, no Python loop per token
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[: size * mid] == b[: size * mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
