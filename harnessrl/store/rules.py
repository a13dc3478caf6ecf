"""The rules every driver enforces identically, and the rollout row every driver reads back.

Kept out of the drivers so that SQLite and PostgreSQL cannot drift apart on what a legal status change
or reward is: a driver only decides *how* to read the current state atomically, never *what* is allowed.
"""

from __future__ import annotations

import math

import orjson

from harnessrl.store.base import IllegalTransition
from harnessrl.store.rows import RowLike
from harnessrl.types import ROLLOUT_TRANSITIONS, FailureKind, Rollout, RolloutStatus

#: The ``rollouts`` columns a driver selects to build a ``Rollout`` (the key hash stays in the table).
ROLLOUT_COLUMNS = (
    "id, run_id, task_id, group_id, input, status, policy_version, step, failure_kind, error, exit_code, "
    "logs, runner_handle, created_at, started_at, finished_at, metadata, purged_at"
)

NEEDS_FAILURE_KIND = frozenset({RolloutStatus.FAILED, RolloutStatus.TIMED_OUT})


def list_rollouts_sql(placeholder: str, *, run_id: str | None, status: RolloutStatus | None, step: int | None,
                      limit: int, offset: int, task_id: str | None,
                      failure_kind: FailureKind | None) -> tuple[str, list[object]]:
    """The paged ``list_rollouts`` query (oldest first) in a driver's placeholder style (``?`` or ``%s``).

    Every filter combination is served by an index of ``schema.py``.
    """
    if limit < 0 or offset < 0:
        raise ValueError("limit and offset must be >= 0")
    where: list[str] = []
    args: list[object] = []
    filters = (("run_id", run_id), ("status", status), ("step", step), ("task_id", task_id),
               ("failure_kind", failure_kind))
    for column, value in filters:
        if value is not None:
            where.append(f"{column} = {placeholder}")
            args.append(str(value) if column in ("status", "failure_kind") else value)
    sql = f"SELECT {ROLLOUT_COLUMNS} FROM rollouts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return f"{sql} ORDER BY created_at, id LIMIT {placeholder} OFFSET {placeholder}", [*args, limit, offset]


def check_transition_args(status: RolloutStatus, failure_kind: FailureKind | None) -> RolloutStatus:
    """Validate a transition request before touching the database (``ValueError`` when malformed)."""
    status = RolloutStatus(status)
    if failure_kind is None and status in NEEDS_FAILURE_KIND:
        raise ValueError(f"moving to {status} needs failure_kind='agent' or 'infra'")
    if failure_kind is not None and status not in (*NEEDS_FAILURE_KIND, RolloutStatus.CANCELLED):
        raise ValueError(f"failure_kind does not apply to status {status}")
    return status


def check_transition(rollout_id: str, current: RolloutStatus, status: RolloutStatus) -> None:
    """Raise ``IllegalTransition`` unless the state machine allows ``current -> status``."""
    if status not in ROLLOUT_TRANSITIONS[current]:
        allowed = ", ".join(sorted(ROLLOUT_TRANSITIONS[current])) or "nothing (terminal)"
        raise IllegalTransition(
            f"rollout {rollout_id!r} cannot move {current} -> {status}; from {current}: {allowed}"
        )


def check_reward_value(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"reward {name!r} must be a finite number, got {value}")
    return value


def rollout_from_row(row: RowLike) -> Rollout:
    return Rollout(
        id=row["id"],
        run_id=row["run_id"],
        task_id=row["task_id"],
        group_id=row["group_id"],
        input=orjson.loads(row["input"]),
        status=RolloutStatus(row["status"]),
        policy_version=row["policy_version"],
        step=row["step"],
        failure_kind=None if row["failure_kind"] is None else FailureKind(row["failure_kind"]),
        error=row["error"],
        exit_code=row["exit_code"],
        logs=row["logs"],
        runner_handle=row["runner_handle"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        metadata=orjson.loads(row["metadata"]),
        purged_at=row["purged_at"],
    )
