"""How a call's prompt relates to the rollout's earlier calls (engine render mode).

In engine mode the engine applies the chat template, so the gateway can only observe whether the prompt
it got back starts with an earlier call's prompt+completion, token for token. The training side merges
calls only when that holds; recording the verdict per call makes template drift visible.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from harnessrl.types import Fidelity


def classify_prompt(
    prompt: Sequence[int], earlier: Sequence[Sequence[int]]
) -> tuple[Fidelity, str | None]:
    """Classify ``prompt`` against earlier prompt+completion sequences (most recent last).

    ``exact`` when it equals one of them, ``extended`` when one of them is a proper prefix, otherwise
    ``rerendered`` with a reason (first call, or where the longest candidate first differs).
    """
    if not earlier:
        return Fidelity.RERENDERED, "first call of the rollout"
    prompt = list(prompt)
    n = len(prompt)
    for seq in reversed(earlier):
        seq = seq if isinstance(seq, list) else list(seq)
        m = len(seq)
        if m <= n and prompt[:m] == seq:
            return (Fidelity.EXACT, None) if m == n else (Fidelity.EXTENDED, None)
    # Where the most recent candidate diverges says most about what the harness changed.
    at = _first_difference(prompt, list(earlier[-1]))
    return Fidelity.RERENDERED, f"no earlier prompt+completion is a prefix (the latest differs at token {at})"


def _first_difference(a: list[int], b: list[int]) -> int:
    """Index of the first position where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    try:  # binary search over packed bytes: memcmp speed instead of a Python loop
        va, vb = array("q", a[:n]).tobytes(), array("q", b[:n]).tobytes()
    except OverflowError:
        return next(i for i in range(n) if a[i] != b[i])
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if va[: 8 * mid] == vb[: 8 * mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
