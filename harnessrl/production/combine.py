"""How a session's feedback signals become its one outcome (``[production.feedback] combine``, ``missing``).

Pure functions, called by the store inside the transaction that closes the window (``windows.py``):

- ``mean``: the mean of every signal; ``min``: the worst signal (a single complaint decides);
- ``last``: the latest signal (a user who changed their mind);
- ``weighted``: each name's *latest* value (a re-post replaces its kind, as a rollout's named rewards do),
  averaged with ``weights[name]``; names without a weight do not count.

A session without a counted signal is ``dropped`` (left out of training and of canary statistics) when
``missing = "drop"``, else ``defaulted`` to that number.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl.production.config import FeedbackConfig
from harnessrl.store.feedback import DEFAULTED, DROPPED, SCORED, Decide, Feedback


def combine(rows: Sequence[Feedback], rule: str, weights: dict[str, float] | None = None) -> float | None:
    """The combined value of ``rows`` by ``rule``; None when no signal counts."""
    rows = sorted(rows, key=lambda r: r.index)
    if rule == "weighted":
        latest = {r.name: r.value for r in rows}  # ordered by index: the last write of a name wins
        counted = {n: v for n, v in latest.items() if (weights or {}).get(n, 0.0) > 0.0}
        total = sum((weights or {})[n] for n in counted)
        return sum((weights or {})[n] * v for n, v in counted.items()) / total if total > 0 else None
    if not rows:
        return None
    if rule == "mean":
        return sum(r.value for r in rows) / len(rows)
    if rule == "last":
        return rows[-1].value
    if rule == "min":
        return min(r.value for r in rows)
    raise ValueError(f"unknown feedback combine rule {rule!r}: use mean, last, min or weighted")


def decide_outcome(rows: Sequence[Feedback], config: FeedbackConfig) -> tuple[float | None, str]:
    """``(outcome, outcome_status)`` of a closing window: scored, else defaulted or dropped per ``missing``."""
    value = combine(rows, config.combine, config.weights)
    if value is not None:
        return value, SCORED
    if config.missing == "drop":
        return None, DROPPED
    return float(config.missing), DEFAULTED


def decider(config: FeedbackConfig) -> Decide:
    """``decide_outcome`` bound to ``config``, in the shape ``Store.close_window`` takes."""
    return lambda rows: decide_outcome(rows, config)
