"""How a call's prompt relates to the rollout's earlier calls (engine render mode).

In engine mode the engine applies the chat template, so the gateway can only observe whether the prompt
it got back starts with an earlier call's prompt+completion, token for token. The training side merges
calls only when that holds; recording the verdict per call makes template drift visible.
"""

from __future__ import annotations

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
    best_diverge = -1
    for seq in reversed(earlier):
        seq = seq if isinstance(seq, list) else list(seq)
        m = len(seq)
        if m <= n and prompt[:m] == seq:
            if m == n:
                return Fidelity.EXACT, None
            return Fidelity.EXTENDED, None
        best_diverge = max(best_diverge, _first_difference(prompt, seq))
    return Fidelity.RERENDERED, f"no earlier prompt+completion is a prefix (first difference at token {best_diverge})"


def _first_difference(a: list[int], b: list[int]) -> int:
    """Index of the first position where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    # Binary search on slice equality: C-speed comparisons instead of a Python loop over 30k tokens.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
