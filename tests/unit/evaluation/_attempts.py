"""A finished (or still running) attempt as the eval reads it, in one word: ok, fail, infra or running."""

from __future__ import annotations

import itertools

from harnessrl.evaluation.figures import Attempt
from harnessrl.types import INTERRUPTED, FailureKind, Rollout, RolloutStatus

_ids = itertools.count()


def attempt(kind: str, task: str = "t", reward: float | None = 1.0) -> Attempt:
    """``kind``: ok, fail (a task failure), infra, interrupted (the eval stopped under it) or running."""
    status = {"ok": RolloutStatus.SUCCEEDED, "fail": RolloutStatus.FAILED, "running": RolloutStatus.RUNNING}.get(
        kind, RolloutStatus.FAILED)
    failure = {"fail": FailureKind.AGENT, "infra": FailureKind.INFRA, "interrupted": FailureKind.INFRA}.get(kind)
    infra = kind in ("infra", "interrupted")
    return Attempt(Rollout(id=f"r{next(_ids)}", run_id="e", task_id=task, group_id="g", input={}, status=status,
                           policy_version=0, failure_kind=failure, error=INTERRUPTED if kind == "interrupted" else None),
                   None if infra else reward)
