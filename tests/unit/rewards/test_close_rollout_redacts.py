"""Secrets never reach the store file: ``close_rollout`` redacts the logs and the error before it writes.

The check reads the SQLite database's raw bytes (main file and write-ahead log), as a backup or a stolen
copy would, not the store's API (whose readers redact again).
"""

from __future__ import annotations

from pathlib import Path

from harnessrl.rewards import RewardOutcome, close_rollout
from harnessrl.runners.spec import AttemptResult
from harnessrl.store import open_store
from harnessrl.types import FailureKind, RolloutStatus

OPENAI_KEY = "sk-proj-" + "Zq8vT2mW9xK4pL7nR3sY6uB1"
RUN_SECRET = "corp-" + "0123456789abcdef" * 2  # matched only by the run's own pattern


def test_logs_and_error_are_redacted_in_the_database_file(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    store = open_store(f"sqlite:///{db}")
    run = store.create_run("r", {"gateway": {"redact_patterns": ["corp-[0-9a-f]{32}"]}})
    rollout = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run.id)
    store.transition_rollout(rollout.id, RolloutStatus.RUNNING, runner_handle="pid:1")
    result = AttemptResult(
        rollout_id=rollout.id, status=RolloutStatus.FAILED, failure_kind=FailureKind.AGENT, reason=None,
        exit_code=1, timed_out=False, stdout=f"export OPENAI_API_KEY={OPENAI_KEY}\n", stderr=f"token {RUN_SECRET}",
        stdout_bytes=40, stderr_bytes=40, duration_s=1.0, attempt_dir=None, workdir=None)
    outcome = RewardOutcome(rollout.id, 0.0, RolloutStatus.FAILED, FailureKind.AGENT,
                            f"verifier failed: auth with {OPENAI_KEY} refused", verifier_output=f"used {RUN_SECRET}")
    closed = close_rollout(store, result, outcome)
    assert "[REDACTED]" in (closed.logs or "") and "[REDACTED]" in (closed.error or "")
    assert "export OPENAI_API_KEY=" in (closed.logs or "")  # the rest of the log is kept
    store.close()

    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("run.db"))
    assert b"OPENAI_API_KEY" in raw  # the file holds the logs...
    for secret in (OPENAI_KEY, RUN_SECRET):
        assert secret.encode() not in raw, f"{secret[:8]}... is in the database file"  # ...not the secrets
