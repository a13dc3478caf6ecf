"""Tables of rollouts: one page of a filtered list, with call counts, outcome reward and duration.

Light on purpose (no training imports), so ``harnessrl rollouts`` starts fast. A page costs two indexed
queries: ``list_rollouts`` with ``limit``/``offset`` and one batched ``rollout_stats``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import Store
from harnessrl.types import FailureKind, Reward, Rollout, RolloutStatus

PAGE_SIZE = 50


def duration_s(r: Rollout, now: float | None = None) -> float | None:
    if r.started_at is None:
        return None
    end = r.finished_at if r.finished_at is not None else (now or time.time())
    return max(0.0, end - r.started_at)


@dataclass
class RolloutRow:
    rollout: Rollout
    calls: int
    reward: float | None  # the outcome reward (harnessrl.rewards.outcome)
    rewards: list[Reward]
    duration_s: float | None


@dataclass
class Filters:
    """The rollouts table's filters, parsed from (untrusted) query parameters."""

    run: str | None = None
    step: int | None = None
    task: str | None = None
    status: RolloutStatus | None = None
    failure: FailureKind | None = None
    page: int = 0
    errors: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, q: Any, run: str | None = None) -> Filters:
        f = cls(run=run or (q.get("run") or None), task=q.get("task") or None)
        for name, conv in (("step", int), ("page", int), ("status", RolloutStatus), ("failure", FailureKind)):
            raw = q.get(name)
            if raw:
                try:
                    setattr(f, name, conv(raw))
                except ValueError:
                    f.errors.append(f"ignored {name}={raw!r}: not a valid value")
        f.page = max(0, f.page)
        return f

    def query(self, **change: Any) -> dict[str, Any]:
        """Query parameters of this filter set with ``change`` applied (for links)."""
        base = {"run": self.run, "step": self.step, "task": self.task, "status": self.status,
                "failure": self.failure, "page": self.page or None} | change
        return {k: str(v) for k, v in base.items() if v is not None}


def rollout_page(store: Store, f: Filters, page_size: int = PAGE_SIZE) -> tuple[list[RolloutRow], bool]:
    """One page of rollouts (oldest first) and whether another page follows."""
    rows = store.list_rollouts(run_id=f.run, status=f.status, step=f.step, task_id=f.task, failure_kind=f.failure,
                               limit=page_size + 1, offset=f.page * page_size)
    more = len(rows) > page_size
    rows = rows[:page_size]
    stats = store.rollout_stats([r.id for r in rows])
    now = time.time()
    out = []
    for r in rows:
        st = stats.get(r.id)
        rewards = st.rewards if st else []
        out.append(RolloutRow(r, st.calls if st else 0, rollout_reward(rewards), rewards, duration_s(r, now)))
    return out, more


