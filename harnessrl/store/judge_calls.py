"""Judge calls: what a model judge answered about a rollout, kept beside its rewards and never trained.

A judge call in group mode scores several rollouts at once; each rollout gets its own row (its score,
its reason), the rows share ``call_id``, and only the row at ``position`` 0 holds the prompt and the
raw answer (the transcripts are in the prompt once, not once per rollout). Rows are numbered per
rollout under the rollout's lock, as rewards are. ``cache_key`` finds an earlier call that saw the same
rubric, task and transcripts (``rewards/judge_cache.py``). A feature store: the core record does not import
it; ``assembly.py`` mixes it into the drivers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from harnessrl.store.mixin import SqlMixin
from harnessrl.store.retention import PurgeCounts
from harnessrl.store.schema import StoreFeature

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike

#: What a model judge answered about a rollout (``rewards/judge.py``): never trained. One judge call may
#: score several rollouts at once (group mode): each gets a row, the rows share ``call_id`` and only
#: ``position`` 0 keeps the prompt (``request``) and raw answer (``response``). ``status``: ``ok``,
#: ``cached`` (the score of an earlier call with the same ``cache_key``, nothing paid) or ``error``.
_TABLE = """CREATE TABLE IF NOT EXISTS judge_calls (
    rollout_id TEXT NOT NULL REFERENCES rollouts (id),
    judge_index INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    score DOUBLE PRECISION,
    reason TEXT,
    error TEXT,
    attempts INTEGER NOT NULL,
    latency_s DOUBLE PRECISION,
    cache_key TEXT NOT NULL,
    request TEXT,
    response TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (rollout_id, judge_index)
)"""
_CACHE_INDEX = "CREATE INDEX IF NOT EXISTS judge_calls_by_cache ON judge_calls (cache_key, created_at)"

JUDGE_COLUMNS = (
    "rollout_id", "judge_index", "call_id", "position", "mode", "model", "status", "score", "reason",
    "error", "attempts", "latency_s", "cache_key", "request", "response", "created_at",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One rollout's part of one judging: the score and reason a judge gave it, or why it could not.

    ``status``: ``ok`` (answered and parsed), ``cached`` (an earlier answer for the same ``cache_key``
    reused, nothing paid), ``error`` (no parseable answer after the retries: the rollout is an infra
    failure of the judge). ``attempts`` counts the requests sent; ``latency_s`` is their total time.
    ``index`` is numbered by the store.
    """

    rollout_id: str
    call_id: str
    position: int
    mode: str
    model: str
    status: str
    score: float | None
    reason: str | None
    error: str | None
    attempts: int
    latency_s: float | None
    cache_key: str
    request: str | None = None
    response: str | None = None
    created_at: float = 0.0
    index: int = -1


class JudgeCallStore(Protocol):
    """What the judges read and write of a store (``JudgeCallsMixin`` has it; ``assembly.py``)."""

    def add_judge_calls(self, calls: Sequence[JudgeCall]) -> list[JudgeCall]:
        """Record one judging's rows (one per rollout it scored) in one transaction, numbered per rollout."""

    def get_judge_calls(self, rollout_id: str) -> list[JudgeCall]:
        """A rollout's judge calls, oldest first."""

    def judge_call_rows(self, call_id: str) -> list[JudgeCall]:
        """All rows of one judging by position (position 0 holds its prompt and raw answer)."""

    def cached_judgement(self, cache_key: str) -> list[JudgeCall]:
        """The rows of the newest answered judging with ``cache_key`` (empty: none)."""


def _judge_call(r: RowLike) -> JudgeCall:
    return JudgeCall(r["rollout_id"], r["call_id"], r["position"], r["mode"], r["model"], r["status"], r["score"],
                     r["reason"], r["error"], r["attempts"], r["latency_s"], r["cache_key"], r["request"],
                     r["response"], r["created_at"], r["judge_index"])  # fmt: skip


class JudgeCallsMixin(SqlMixin):
    """The judge-call methods of ``SqlStore`` drivers (mixed in before ``SqlStore``)."""

    FEATURE = StoreFeature("judge calls", 3, (_TABLE, _CACHE_INDEX))

    def add_judge_calls(self, calls: Sequence[JudgeCall]) -> list[JudgeCall]:
        """Record the rows of one judging in one transaction; returns them numbered and timed."""
        p = self.P
        now = time.time()
        out: list[JudgeCall] = []
        with self._write() as conn:
            for rid in sorted({c.rollout_id for c in calls}):  # lock in id order: no deadlock between writers
                self._one(conn, f"SELECT 1 FROM rollouts WHERE id = {p}{self.LOCK_ROWS}", (rid,), f"rollout {rid!r}")
            nexts: dict[str, int] = {}
            for c in calls:
                if c.rollout_id not in nexts:
                    sql = f"SELECT COALESCE(MAX(judge_index) + 1, 0) AS n FROM judge_calls WHERE rollout_id = {p}"
                    nexts[c.rollout_id] = int(self._one(conn, sql, (c.rollout_id,), "the next judge index")["n"])
                out.append(replace(c, index=nexts[c.rollout_id], created_at=now))
                nexts[c.rollout_id] += 1
            marks = ", ".join([p] * len(JUDGE_COLUMNS))
            with closing(conn.cursor()) as cur:
                cur.executemany(
                    f"INSERT INTO judge_calls ({', '.join(JUDGE_COLUMNS)}) VALUES ({marks})",
                    [(c.rollout_id, c.index, c.call_id, c.position, c.mode, c.model, c.status, c.score,
                      self._text(c.reason), self._text(c.error), c.attempts, c.latency_s, c.cache_key,
                      self._text(c.request), self._text(c.response), c.created_at) for c in out],
                )
        return out

    def get_judge_calls(self, rollout_id: str) -> list[JudgeCall]:
        """The rollout's judge calls, oldest first (empty when it was never judged)."""
        with self._read() as conn:
            sql = f"SELECT * FROM judge_calls WHERE rollout_id = {self.P} ORDER BY judge_index"
            return [_judge_call(r) for r in conn.execute(sql, (rollout_id,)).fetchall()]

    def judge_call_rows(self, call_id: str) -> list[JudgeCall]:
        """Every rollout's row of one judging (by position): the prompt and answer are on position 0."""
        with self._read() as conn:
            sql = f"SELECT * FROM judge_calls WHERE call_id = {self.P} ORDER BY position, rollout_id"
            return [_judge_call(r) for r in conn.execute(sql, (call_id,)).fetchall()]

    def cached_judgement(self, cache_key: str) -> list[JudgeCall]:
        """The rows (by position) of the newest answered judging with this ``cache_key``; empty if none."""
        p = self.P
        with self._read() as conn:
            row = conn.execute(
                f"SELECT call_id FROM judge_calls WHERE cache_key = {p} AND status = 'ok'"
                " ORDER BY created_at DESC LIMIT 1", (cache_key,)).fetchone()  # fmt: skip
        return [] if row is None else self.judge_call_rows(row["call_id"])

    def _purge_judge_text(self) -> None:
        """Retention: a purged rollout's judge prompts and raw answers go too (they quote its transcript);
        scores, reasons, models and latencies stay."""
        with self._write() as conn:
            conn.execute(
                "UPDATE judge_calls SET request = NULL, response = NULL WHERE (request IS NOT NULL OR response"
                " IS NOT NULL) AND rollout_id IN (SELECT id FROM rollouts WHERE purged_at IS NOT NULL)")

    def purge(self, **kwargs: Any) -> PurgeCounts:
        counts: PurgeCounts = super().purge(**kwargs)  # type: ignore[misc]
        if not kwargs.get("dry_run", True):
            self._purge_judge_text()
        return counts
