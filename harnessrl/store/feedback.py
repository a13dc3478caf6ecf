"""Delayed feedback on production sessions: raw signals, the window that closes on them, trained marks.

An application posts feedback about a session (``production/feedback.py``) until the session's window
closes (``sessions.feedback_closes_at``: its last call + ``[production.feedback] window_s``). Rows are
numbered per session under the session's row lock, as rewards are per rollout. Closing a window
(``production/windows.py``) decides the session's outcome from its rows *inside the same transaction
that locks the session*, so a signal is either refused (the window closed) or counted, never lost in
between; for a recorded session the outcome also becomes a reward named ``feedback`` on its rollout,
which is closed ``succeeded``. Training marks each session with the version its update produced
(``trained_version``), or ``STALE`` when the staleness bound dropped it. A feature store of production
mode (``sessions`` is in ``deployments.py``): the core record does not import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessrl.store.base import StoreError
from harnessrl.store.mixin import SqlMixin
from harnessrl.store.rules import check_reward_value, check_transition
from harnessrl.store.schema import StoreFeature
from harnessrl.types import RolloutStatus

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike

_FEEDBACK = """CREATE TABLE IF NOT EXISTS feedback (
    deployment TEXT NOT NULL,
    session_id TEXT NOT NULL,
    feedback_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (deployment, session_id, feedback_index),
    FOREIGN KEY (deployment, session_id) REFERENCES sessions (deployment, id)
)"""

#: The reward a closed window writes on a recorded session's rollout.
FEEDBACK_REWARD = "feedback"
#: ``sessions.outcome_status`` values: ``open`` until the window closes, then how the outcome was decided.
OPEN, SCORED, DEFAULTED, DROPPED = "open", "scored", "defaulted", "dropped"
#: ``sessions.trained_version`` of a session the staleness bound left out (never trained, counted once).
STALE = -1


class FeedbackWindowClosed(StoreError):
    """Feedback for a session whose window has closed (HTTP 410); ``closes_at`` says when it closed."""

    def __init__(self, message: str, closes_at: float) -> None:
        super().__init__(message)
        self.closes_at = closes_at


@dataclass(frozen=True, slots=True)
class Feedback:
    """One signal about a session: a name (``thumbs``, ``resolved``, ``conversion``) and a value."""

    deployment: str
    session_id: str
    name: str
    value: float
    created_at: float
    index: int


@dataclass(frozen=True, slots=True)
class SessionWindow:
    """What closing and training need of a session row (``deployments.py`` owns the full row)."""

    deployment: str
    id: str
    rollout_id: str | None
    recorded: bool
    arm: str
    policy_version: int
    last_call_at: float
    feedback_closes_at: float
    outcome: float | None
    outcome_status: str
    trained_version: int | None


#: Decides a closing session's outcome from its feedback rows: ``(outcome, outcome_status)``.
Decide = Callable[[Sequence[Feedback]], tuple[float | None, str]]

_WINDOW_COLUMNS = ("deployment, id, rollout_id, recorded, arm, policy_version, last_call_at, feedback_closes_at, "
                   "outcome, outcome_status, trained_version")


def _feedback(r: RowLike) -> Feedback:
    return Feedback(r["deployment"], r["session_id"], r["name"], r["value"], r["created_at"], r["feedback_index"])


def _window(r: RowLike) -> SessionWindow:
    return SessionWindow(r["deployment"], r["id"], r["rollout_id"], bool(r["recorded"]), r["arm"],
                         r["policy_version"], r["last_call_at"], r["feedback_closes_at"], r["outcome"],
                         r["outcome_status"], r["trained_version"])  # fmt: skip


class FeedbackMixin(SqlMixin):
    """The feedback methods of ``SqlStore`` drivers (mixed in before ``SqlStore``)."""

    FEATURE = StoreFeature("production feedback", 4, (_FEEDBACK,))

    def _locked_session(self, conn: Any, deployment: str, session_id: str) -> RowLike:
        sql = f"SELECT {_WINDOW_COLUMNS} FROM sessions WHERE deployment = {self.P} AND id = {self.P}{self.LOCK_ROWS}"
        return self._one(conn, sql, (deployment, session_id), f"session {session_id!r} of deployment {deployment!r}")

    def add_feedback(self, deployment: str, session_id: str, name: str, value: float,
                     now: float | None = None) -> Feedback:
        """Record one signal; ``NotFound`` for an unknown session, ``FeedbackWindowClosed`` after its window."""
        value = check_reward_value(name, value)
        now = time.time() if now is None else now
        p = self.P
        with self._write() as conn:
            row = self._locked_session(conn, deployment, session_id)
            closes = float(row["feedback_closes_at"])
            if row["outcome_status"] != OPEN or now >= closes:
                raise FeedbackWindowClosed(
                    f"the feedback window of session {session_id!r} closed at {_iso(closes)}; feedback is accepted "
                    "for [production.feedback] window_s after a session's last call", closes)
            sql = (f"SELECT COALESCE(MAX(feedback_index) + 1, 0) AS n FROM feedback"
                   f" WHERE deployment = {p} AND session_id = {p}")
            index = int(self._one(conn, sql, (deployment, session_id), "the next feedback index")["n"])
            conn.execute(
                "INSERT INTO feedback (deployment, session_id, feedback_index, name, value, created_at)"
                f" VALUES ({p}, {p}, {p}, {p}, {p}, {p})", (deployment, session_id, index, name, value, now))
        return Feedback(deployment, session_id, name, value, now, index)

    def get_feedback(self, deployment: str, session_id: str) -> list[Feedback]:
        """The session's signals, oldest first (empty when nobody rated it)."""
        p = self.P
        with self._read() as conn:
            sql = f"SELECT * FROM feedback WHERE deployment = {p} AND session_id = {p} ORDER BY feedback_index"
            return [_feedback(r) for r in conn.execute(sql, (deployment, session_id)).fetchall()]

    def get_session_window(self, deployment: str, session_id: str) -> SessionWindow:
        with self._read() as conn:
            sql = f"SELECT {_WINDOW_COLUMNS} FROM sessions WHERE deployment = {self.P} AND id = {self.P}"
            return _window(self._one(conn, sql, (deployment, session_id),
                                     f"session {session_id!r} of deployment {deployment!r}"))

    def due_windows(self, now: float, deployment: str | None = None, limit: int = 500) -> list[SessionWindow]:
        """Sessions still ``open`` whose window closed by ``now``, earliest first."""
        p = self.P
        sql, args = f"SELECT {_WINDOW_COLUMNS} FROM sessions WHERE outcome_status = {p}", [OPEN]
        if deployment is not None:
            sql, args = f"{sql} AND deployment = {p}", [*args, deployment]
        sql += f" AND feedback_closes_at <= {p} ORDER BY feedback_closes_at, deployment, id LIMIT {p}"
        with self._read() as conn:
            return [_window(r) for r in conn.execute(sql, [*args, now, int(limit)]).fetchall()]

    def close_window(self, deployment: str, session_id: str, decide: Decide,
                     now: float | None = None) -> SessionWindow | None:
        """Decide a due session's outcome from its feedback, in one transaction; None when it is not due
        (a new call moved its window) or was already closed. A recorded, scored or defaulted session gets a
        ``feedback`` reward on its rollout; a recorded session's rollout is closed ``succeeded``."""
        now = time.time() if now is None else now
        p = self.P
        with self._write() as conn:
            row = self._locked_session(conn, deployment, session_id)
            if row["outcome_status"] != OPEN or float(row["feedback_closes_at"]) > now:
                return None
            sql = f"SELECT * FROM feedback WHERE deployment = {p} AND session_id = {p} ORDER BY feedback_index"
            rows = [_feedback(r) for r in conn.execute(sql, (deployment, session_id)).fetchall()]
            outcome, status = decide(rows)
            if status not in (SCORED, DEFAULTED, DROPPED) or (outcome is None) != (status == DROPPED):
                raise ValueError(f"a window closes scored or defaulted with an outcome, or dropped without: "
                                 f"got {status!r} with {outcome!r}")
            if outcome is not None:
                outcome = check_reward_value(FEEDBACK_REWARD, outcome)
            conn.execute(f"UPDATE sessions SET outcome = {p}, outcome_status = {p} WHERE deployment = {p} AND id = {p}",
                         (outcome, status, deployment, session_id))
            if row["recorded"] and row["rollout_id"] is not None:
                self._finish_rollout(conn, row["rollout_id"], outcome, now)
            done = self._locked_session(conn, deployment, session_id)
        return _window(done)

    def _finish_rollout(self, conn: Any, rollout_id: str, outcome: float | None, now: float) -> None:
        """The outcome as the rollout's ``feedback`` reward, and the rollout closed ``succeeded`` (a
        cancelled rollout takes neither; one already closed keeps its status)."""
        p = self.P
        sql = f"SELECT status FROM rollouts WHERE id = {p}{self.LOCK_ROWS}"
        status = RolloutStatus(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")["status"])
        if status == RolloutStatus.CANCELLED:
            return
        if outcome is not None:
            sql = f"SELECT COALESCE(MAX(reward_index) + 1, 0) AS n FROM rewards WHERE rollout_id = {p}"
            index = int(self._one(conn, sql, (rollout_id,), "the next reward index")["n"])
            conn.execute("INSERT INTO rewards (rollout_id, reward_index, name, value, call_index, created_at)"
                         f" VALUES ({p}, {p}, {p}, {p}, NULL, {p})", (rollout_id, index, FEEDBACK_REWARD, outcome, now))
        if status.terminal:
            return
        path = [RolloutStatus.RUNNING, RolloutStatus.SUCCEEDED] if status == RolloutStatus.QUEUED else \
            [RolloutStatus.SUCCEEDED]
        for nxt in path:  # the state machine's own hops: queued -> running -> succeeded
            check_transition(rollout_id, status, nxt)
            status = nxt
        conn.execute(f"UPDATE rollouts SET status = {p}, started_at = COALESCE(started_at, {p}), finished_at = {p}"
                     f" WHERE id = {p}", (str(status), now, now, rollout_id))

    def trainable_sessions(self, deployment: str, min_version: int, limit: int = 1000) -> list[SessionWindow]:
        """Recorded sessions with a decided outcome, not yet trained, served by ``min_version`` or later;
        earliest window first."""
        p = self.P
        sql = (f"SELECT {_WINDOW_COLUMNS} FROM sessions WHERE deployment = {p} AND outcome_status IN ({p}, {p})"
               f" AND recorded = 1 AND rollout_id IS NOT NULL AND trained_version IS NULL AND policy_version >= {p}"
               f" ORDER BY feedback_closes_at, id LIMIT {p}")
        with self._read() as conn:
            rows = conn.execute(sql, (deployment, SCORED, DEFAULTED, min_version, int(limit))).fetchall()
        return [_window(r) for r in rows]

    def drop_stale_sessions(self, deployment: str, min_version: int) -> int:
        """Mark ``STALE`` the trainable sessions served by a version older than ``min_version``; how many."""
        p = self.P
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE sessions SET trained_version = {p} WHERE deployment = {p} AND outcome_status IN ({p}, {p})"
                f" AND recorded = 1 AND rollout_id IS NOT NULL AND trained_version IS NULL AND policy_version < {p}",
                (STALE, deployment, SCORED, DEFAULTED, min_version))
            return int(cur.rowcount)

    def mark_sessions_trained(self, deployment: str, session_ids: Sequence[str], version: int) -> int:
        """Say that the update producing ``version`` used these sessions; sessions already marked stay as
        they are (nothing is trained twice). Returns how many were marked."""
        p = self.P
        with self._write() as conn:
            n = 0
            for sid in sorted(set(session_ids)):
                cur = conn.execute(f"UPDATE sessions SET trained_version = {p} WHERE deployment = {p} AND id = {p}"
                                   " AND trained_version IS NULL", (version, deployment, sid))
                n += int(cur.rowcount)
            return n

    def trained_outcomes(self, deployment: str) -> list[tuple[int, float]]:
        """``(trained_version, outcome)`` of every trained session, by version: the running baseline of
        off-policy training is rebuilt from these after a restart."""
        p = self.P
        sql = (f"SELECT trained_version, outcome FROM sessions WHERE deployment = {p} AND trained_version >= 0"
               " AND outcome IS NOT NULL ORDER BY trained_version, feedback_closes_at, id")
        with self._read() as conn:
            return [(int(r["trained_version"]), float(r["outcome"])) for r in conn.execute(sql, (deployment,))]


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
