"""Retention: how long a call's text and token arrays are kept, and what a purge removes.

A purge works on whole rollouts: every call of a rollout is emptied in the same transaction, so a kept
call never extends (by prompt prefix, ``schema.py``) a purged one. A rollout is purged when it finished
before the cutoff *and* its run has ended (``Store.end_run``; a rollout without a run only has to be
finished): a run that may still train keeps all of its data, whatever its age. What stays is the metadata
row (ids, times, status, policy version, latency, token counts, finish reasons) and the rewards.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``"30d"``, ``"12h"``, ``"90m"``, ``"2w"``, ``"45s"`` (``ValueError`` otherwise)."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(
            f"retention {text!r} is not a duration: write a number and a unit (s, m, h, d, w), e.g. '30d', '12h'"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    """What a purge removed (or, dry, would remove) and what it kept because a run still needs it.

    ``bytes`` counts the request and response text, the token arrays and the logs that go (the database
    frees them; on disk see ``Store.reclaim_space``). ``held_rollouts`` are old enough but belong to a run
    that has not ended.
    """

    runs: int = 0
    rollouts: int = 0
    calls: int = 0
    bytes: int = 0
    held_rollouts: int = 0

    def __add__(self, other: PurgeCounts) -> PurgeCounts:
        return PurgeCounts(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, int, int, int, int]:
        return (self.runs, self.rollouts, self.calls, self.bytes, self.held_rollouts)


def scope_sql(run_ids: Sequence[str | None] | None, in_ids: str) -> tuple[str, list[str]]:
    """``(condition on r.run_id, the run ids it needs)``; ``None`` in ``run_ids`` means rollouts without a run.

    ``in_ids`` is the driver's ``_in_ids`` condition for the named ids ("" when there are none).
    """
    if run_ids is None:
        return "", []
    named = [r for r in run_ids if r is not None]
    parts = [f"r.run_id{in_ids}"] if named else []
    if None in run_ids:
        parts.append("r.run_id IS NULL")
    return f" AND ({' OR '.join(parts) or 'FALSE'})", named


#: Rollouts a purge may empty: finished before the cutoff, not purged yet, their run (if any) ended.
#: ``{scope}`` is ``scope_sql``'s condition; the one parameter is the cutoff.
ELIGIBLE = (
    "FROM rollouts r LEFT JOIN runs u ON u.id = r.run_id"
    " WHERE r.purged_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at < {p}{scope}"
    " AND (r.run_id IS NULL OR u.ended_at IS NOT NULL)"
)
#: Rollouts as old as that but kept because their run has not ended.
HELD = (
    "FROM rollouts r JOIN runs u ON u.id = r.run_id"
    " WHERE r.purged_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at < {p}{scope}"
    " AND u.ended_at IS NULL"
)
