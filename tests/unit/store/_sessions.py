"""Session rows as the production gateway writes them, for the feedback, window and training tests."""

from __future__ import annotations

from harnessrl.store import Store
from harnessrl.store.feedback import OPEN
from harnessrl.types import RolloutStatus

NOW = 1_000_000.0


def add_session(store: Store, sid: str, *, deployment: str = "support", recorded: bool = True, version: int = 0,
                closes_at: float = NOW + 100, rollout_status: RolloutStatus = RolloutStatus.RUNNING) -> str | None:
    """A deployment (once) and a session row, as the production gateway writes them (``deployments.py``
    owns those writes; the rows are made here so this suite stands on the schema alone)."""
    p = store.P  # type: ignore[attr-defined]
    run_id = f"production:{deployment}"
    with store._write() as conn:  # type: ignore[attr-defined]
        if conn.execute(f"SELECT 1 FROM deployments WHERE name = {p}", (deployment,)).fetchone() is None:
            conn.execute(f"INSERT INTO runs (id, name, config, created_at) VALUES ({p}, {p}, '{{}}', 0)",
                         (run_id, run_id))
            conn.execute(f"INSERT INTO deployments (name, run_id, config, created_at) VALUES ({p}, {p}, '{{}}', 0)",
                         (deployment, run_id))
    rollout_id = None
    if recorded:
        rollout_id = store.create_rollout(task_id=sid, input={}, group_id=deployment, api_key_hash="k",
                                          policy_version=version, run_id=run_id).id
        if rollout_status != RolloutStatus.QUEUED:
            store.transition_rollout(rollout_id, RolloutStatus.RUNNING)
    with store._write() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO sessions (deployment, id, rollout_id, key_id, arm, policy_version, recorded, calls, created_at,"
            f" last_call_at, feedback_closes_at, outcome_status) VALUES ({', '.join([p] * 12)})",
            (deployment, sid, rollout_id, "key1", "stable", version, int(recorded), 1, NOW - 10, NOW - 10,
             closes_at, OPEN))
    return rollout_id


