"""How a call's prompt relates to the rollout's earlier calls (engine render mode).

In engine mode the engine applies the chat template, so the gateway can only observe whether the prompt
it got back starts with an earlier call's prompt+completion, token for token. The training side merges
calls only when that holds; recording the verdict per call makes template drift visible.

What a live rollout keeps for the check is ``PromptHistory``: the latest sequence packed (4 bytes a token)
and the earlier few as length + digest (the verdict) and a delta from the next newer one (the reason: a
re-rendered prompt names the kept sequence it shares the longest prefix with, and where they part). An
agent's growing conversation costs one context; no history costs more than two.
"""

from __future__ import annotations

import hashlib
import struct
from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from harnessrl.types import Fidelity

#: Earlier prompt+completion sequences checked against a new prompt (the latest and three before it).
KEEP = 4


def _digest(packed: array | memoryview) -> bytes:
    """The digest of a sequence as ``pack`` packs it: int32 when its ids fit, else int64 (so two equal
    sequences always digest alike; a packed prefix is re-packed by ``_prefix_digest`` when widths differ)."""
    return hashlib.blake2b(packed, digest_size=16).digest()


def _prefix_digest(prompt: array, length: int) -> bytes:
    """The digest of ``prompt``'s first ``length`` tokens, packed as ``pack`` would pack them alone."""
    if prompt.typecode == "i":
        return _digest(memoryview(prompt)[:length])
    return _digest(pack(prompt[:length].tolist()))


class _Older(NamedTuple):
    """An earlier sequence: its length and digest (the verdict), and its tokens as a delta (the reason).

    ``tokens`` is the part after the ``shared`` tokens it has in common with the next newer sequence, or
    None once dropped to keep the history's size bounded (the digest still gives the verdict).
    """

    length: int
    digest: bytes
    shared: int
    tokens: array | None
    call: int | None


class PromptHistory:
    """A rollout's last ``keep`` prompt+completion sequences, as the prefix check needs them.

    The latest is kept as int32 (int64 when an id does not fit) tokens. Each one before it keeps a digest
    (to decide exact/extended) and its tokens as a delta from the next newer one: a growing agent
    conversation costs nothing more, and a side request between two agent calls (a commit message, a
    session title) costs only its own tokens. Those deltas are what let a re-rendered prompt's reason
    name the sequence it is closest to rather than the latest, which may be an unrelated side request.
    Their total is capped at the longest sequence kept, so a harness that rewrites its whole history
    every call holds at most two contexts (older deltas beyond the cap keep only their digest).
    ``append`` and ``clear`` behave like a bounded deque of sequences.
    """

    __slots__ = ("_keep", "_latest", "_latest_call", "_older")

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._latest: array | None = None
        self._latest_call: int | None = None
        self._older: list[_Older] = []  # oldest first; a list: a deque's block is 600 bytes

    def append(self, seq: Sequence[int] | array, call: int | None = None) -> None:
        """Add a prompt+completion; ``call`` (the call's index, when known) names it in reasons."""
        new = pack(seq)
        old = self._latest
        if old is not None and self._keep > 1:
            a, b = _same_width(old, new)
            shared = _first_difference(a.tobytes(), b.tobytes(), a.itemsize)
            self._older.append(_Older(len(old), _digest(old), shared, old[shared:], self._latest_call))
            del self._older[: -(self._keep - 1)]
            self._cap(max(len(new), *(o.length for o in self._older)))
        self._latest, self._latest_call = new, call

    def _cap(self, budget: int) -> None:
        """Drop the oldest deltas until the rest hold at most ``budget`` tokens (newer ones rebuild older)."""
        total = sum(len(o.tokens) for o in self._older if o.tokens is not None)
        for i, o in enumerate(self._older):
            if total <= budget:
                return
            if o.tokens is not None:
                total -= len(o.tokens)
                self._older[i] = o._replace(tokens=None)

    def clear(self) -> None:
        self._latest, self._latest_call = None, None
        self._older.clear()

    def __len__(self) -> int:
        return 0 if self._latest is None else 1 + len(self._older)

    def nbytes(self) -> int:
        """Bytes held (token data and digests; the containers add a few hundred)."""
        latest = 0 if self._latest is None else len(self._latest) * self._latest.itemsize
        deltas = sum(len(o.tokens) * o.tokens.itemsize for o in self._older if o.tokens is not None)
        return latest + deltas + 16 * len(self._older)

    def classify(self, prompt: Sequence[int] | array) -> tuple[Fidelity, str | None]:
        if self._latest is None:
            return Fidelity.RERENDERED, "first call of the rollout"
        mine = pack(prompt)
        latest, mine_w = _same_width(self._latest, mine)
        n, m = len(prompt), len(latest)
        if m <= n and memoryview(mine_w)[:m] == memoryview(latest):
            return (Fidelity.EXACT, None) if m == n else (Fidelity.EXTENDED, None)
        for length, digest, *_ in reversed(self._older):
            if length <= n and _prefix_digest(mine, length) == digest:
                return (Fidelity.EXACT, None) if length == n else (Fidelity.EXTENDED, None)
        return Fidelity.RERENDERED, self._reason(mine)

    def _reason(self, prompt: array) -> str:
        """Name the kept sequence sharing the longest prefix with ``prompt`` (latest on ties) and where they part.

        The verdict is made against every kept sequence; naming the latest would point at a side request
        when one came between two agent calls.
        """
        best_at, best_back, best_len, best_call = -1, 0, 0, None
        for back, (seq, call) in enumerate(self._sequences()):
            a, b = _same_width(prompt, seq)
            at = _first_difference(a.tobytes(), b.tobytes(), a.itemsize)
            if at > best_at:
                best_at, best_back, best_len, best_call = at, back, len(seq), call
        where = f"the one {best_back} before the latest" if best_back > 1 else (
            "the one before the latest" if best_back else "the latest")
        name = where if best_call is None else f"call {best_call}, {where}"
        return (f"no earlier prompt+completion is a prefix: closest is {name} ({best_len} tokens), "
                f"differing at token {best_at}")

    def _sequences(self) -> Iterator[tuple[array, int | None]]:
        """The kept sequences whose tokens can be rebuilt, latest first, with their call index."""
        assert self._latest is not None
        seq: array = self._latest
        yield seq, self._latest_call
        for o in reversed(self._older):
            if o.tokens is None:
                return
            head, tail = _same_width(seq[: o.shared], o.tokens)
            seq = head + tail
            yield seq, o.call


def classify_prompt(
    prompt: Sequence[int] | array, earlier: PromptHistory | Sequence[Sequence[int]]
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


def pack(seq: Sequence[int] | array) -> array:
    """``seq`` as int32, or int64 when an id does not fit (packed by ``struct``: twice ``array``'s speed).
    An array packed already is returned as it is: a call's prompt is packed once for the verdict, the
    history and the store (``ModelCall._new_call``), at ~9 ns a token each time it was packed."""
    if isinstance(seq, array) and seq.typecode in "iq":
        return seq
    n = len(seq)
    try:
        return array("i", struct.pack(f"={n}i", *seq))
    except struct.error:
        try:
            return array("q", struct.pack(f"={n}q", *seq))
        except struct.error:
            return array("q", seq)  # not ints: array's own error


def joined(a: array, b: array) -> array:
    """``a`` then ``b``, packed alike (a prompt and its completion, for ``PromptHistory.append``)."""
    a, b = _same_width(a, b)
    return a + b


def _same_width(a: array, b: array) -> tuple[array, array]:
    """``a`` and ``b`` with one item size, so their bytes compare token for token."""
    if a.typecode == b.typecode:
        return a, b
    return array("q", a), array("q", b)


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
