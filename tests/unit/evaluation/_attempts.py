"""A finished (or still running) attempt as the eval reads it, in one word: ok, fail, infra or running."""

from __future__ import annotations

import itertools

from harnessrl.evaluation.figures import Attempt
from harnessrl.types import FailureKind, Rollout, RolloutStatus

_ids = itertools.count()


def attempt(kind: str, task: str = "t", reward: float | None = 1.0) -> Attempt:
    status = {"ok": RolloutStatus.SUCCEEDED, "fail": RolloutStatus.FAILED, "infra": RolloutStatus.FAILED,
              "running": RolloutStatus.RUNNING}[kind]
    failure = {"fail": FailureKind.AGENT, "infra": FailureKind.INFRA}.get(kind)
    return Attempt(Rollout(id=f"r{next(_ids)}", run_id="e", task_id=task, group_id="g", input={}, status=status,
                           policy_version=0, failure_kind=failure), None if kind == "infra" else reward)
