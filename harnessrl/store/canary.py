"""Canary decisions: which version serves which fraction of a deployment's sessions, and why.

Every evaluation of a canary is a row of ``canary_decisions``, numbered per deployment under the
deployment's row lock: ``start`` (a candidate begins serving ``fraction`` of new sessions), ``hold``
(evaluated, not enough evidence or not yet decided), ``promote`` (the candidate becomes the stable
version), ``rollback`` (the candidate is dropped). What they leave serving is production's rule
(``production/canary_state.py``), read from the newest rows, so a restarted gateway serves what it served
before. ``stats`` is the evidence as JSON: the sessions and mean outcome per arm, and where each arm's
weights live (``weights``: an adapter folder, so a restarted engine can load them again). The per-arm statistics read ``sessions`` (``deployments.py`` writes it).
A feature store of production mode: the core record does not import it; ``assembly.py`` mixes it in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from harnessrl.store.mixin import SqlMixin
from harnessrl.store.schema import StoreFeature

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike

#: Every decision about which version serves which fraction of a deployment's sessions: ``start`` (a
#: candidate begins serving ``fraction``), ``promote``, ``rollback``, ``hold`` (evaluated, not yet decided);
#: ``stats`` is the evidence (sessions and mean outcome per arm) as JSON.
_CANARY_DECISIONS = """CREATE TABLE IF NOT EXISTS canary_decisions (
    deployment TEXT NOT NULL REFERENCES deployments (name),
    decision_index INTEGER NOT NULL,
    action TEXT NOT NULL,
    stable_version INTEGER NOT NULL,
    candidate_version INTEGER,
    fraction DOUBLE PRECISION NOT NULL,
    stats TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (deployment, decision_index)
)"""

#: The actions of ``canary_decisions``; ``promote`` and ``rollback`` end a canary.
ACTIONS = ("start", "hold", "promote", "rollback")
#: Session outcomes that count as decided (``dropped`` sessions have none).
DECIDED = ("scored", "defaulted")

_COLUMNS = ("deployment", "decision_index", "action", "stable_version", "candidate_version", "fraction",
            "stats", "reason", "created_at")


@dataclass(frozen=True, slots=True)
class CanaryDecision:
    """One decision about a deployment's versions, with its evidence (``stats``) and reason.

    ``stable_version``: the version serving the stable arm when decided (after a ``promote``, the new
    stable version is ``candidate_version``). ``index`` and ``created_at`` are set by the store.
    """

    deployment: str
    action: str
    stable_version: int
    candidate_version: int | None
    fraction: float
    stats: dict[str, Any]
    reason: str
    created_at: float = 0.0
    index: int = -1


@dataclass(frozen=True, slots=True)
class ArmStats:
    """Sessions of one (arm, version) created since a time: how many, how many decided, their mean, and the
    mean of their squares (the spread a confidence rule needs; None in evidence recorded before it)."""

    arm: str
    version: int
    sessions: int
    decided: int
    mean: float | None
    mean_sq: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "version": self.version, "sessions": self.sessions, "decided": self.decided,
                "mean": self.mean, "mean_sq": self.mean_sq}

    @property
    def variance(self) -> float | None:
        """The outcomes' sample variance (n - 1), None without ``mean_sq`` or with fewer than 2 decided."""
        if self.mean is None or self.mean_sq is None or self.decided < 2:
            return None
        return max(0.0, self.mean_sq - self.mean * self.mean) * self.decided / (self.decided - 1)


class CanaryConflict(RuntimeError):
    """Another gateway recorded a decision for the deployment since this one read its state: read it again."""


def _decision(r: RowLike) -> CanaryDecision:
    return CanaryDecision(r["deployment"], r["action"], r["stable_version"], r["candidate_version"],
                          r["fraction"], orjson.loads(r["stats"]), r["reason"], r["created_at"],
                          r["decision_index"])  # fmt: skip


class CanaryMixin(SqlMixin):
    """The canary methods of ``SqlStore`` drivers (mixed in before ``SqlStore``)."""

    FEATURE = StoreFeature("production canary", 4, (_CANARY_DECISIONS,))

    def add_canary_decision(self, decision: CanaryDecision, expected_index: int | None = None) -> CanaryDecision:
        """Record one decision, numbered after the deployment's last one; returns it numbered and timed.

        ``expected_index``: the index the caller's view says comes next; when another writer (a second
        gateway on the same database) recorded one since, ``CanaryConflict`` and nothing is written."""
        if decision.action not in ACTIONS:
            raise ValueError(f"canary action {decision.action!r} is not one of {ACTIONS}")
        p = self.P
        with self._write() as conn:
            self._one(conn, f"SELECT 1 FROM deployments WHERE name = {p}{self.LOCK_ROWS}", (decision.deployment,),
                      f"deployment {decision.deployment!r}")
            sql = f"SELECT COALESCE(MAX(decision_index) + 1, 0) AS n FROM canary_decisions WHERE deployment = {p}"
            index = int(self._one(conn, sql, (decision.deployment,), "the next decision index")["n"])
            if expected_index is not None and index != expected_index:
                raise CanaryConflict(f"deployment {decision.deployment!r} has a canary decision newer than this "
                                     f"gateway's view (next index {index}, expected {expected_index})")
            row = CanaryDecision(decision.deployment, decision.action, decision.stable_version,
                                 decision.candidate_version, float(decision.fraction), decision.stats,
                                 decision.reason, time.time(), index)  # fmt: skip
            conn.execute(
                f"INSERT INTO canary_decisions ({', '.join(_COLUMNS)}) VALUES ({', '.join([p] * len(_COLUMNS))})",
                (row.deployment, row.index, row.action, row.stable_version, row.candidate_version, row.fraction,
                 orjson.dumps(row.stats).decode(), self._text(row.reason), row.created_at))
        return row

    def canary_decisions(self, deployment: str, limit: int | None = None) -> list[CanaryDecision]:
        """The deployment's decisions, oldest first; ``limit``: only the newest ``limit`` of them."""
        p = self.P
        with self._read() as conn:
            if limit is None:
                sql = f"SELECT * FROM canary_decisions WHERE deployment = {p} ORDER BY decision_index"
                return [_decision(r) for r in conn.execute(sql, (deployment,)).fetchall()]
            sql = (f"SELECT * FROM canary_decisions WHERE deployment = {p} ORDER BY decision_index DESC"
                   f" LIMIT {int(limit)}")
            return [_decision(r) for r in reversed(conn.execute(sql, (deployment,)).fetchall())]

    def latest_canary_decisions(self, deployment: str) -> list[CanaryDecision]:
        """What the deployment's serving state is read from (``production/canary_state.py``): its latest
        ``start`` (when it has one) and its newest decision, oldest first; empty before its first decision."""
        p = self.P
        with self._read() as conn:
            last = conn.execute(f"SELECT * FROM canary_decisions WHERE deployment = {p} ORDER BY decision_index"
                                " DESC LIMIT 1", (deployment,)).fetchone()  # fmt: skip
            if last is None:
                return []
            start = conn.execute(f"SELECT * FROM canary_decisions WHERE deployment = {p} AND action = 'start'"
                                 " ORDER BY decision_index DESC LIMIT 1", (deployment,)).fetchone()  # fmt: skip
        decisions = [_decision(start)] if start is not None else []
        return [*decisions, _decision(last)]

    def arm_stats(self, deployment: str, since: float) -> list[ArmStats]:
        """Per (arm, version): the deployment's sessions created at or after ``since``, those with a decided
        outcome (scored or defaulted) and their mean outcome; ordered by arm and version."""
        p = self.P
        decided = ", ".join(f"'{s}'" for s in DECIDED)
        sql = (f"SELECT arm, policy_version, COUNT(*) AS n,"
               f" SUM(CASE WHEN outcome_status IN ({decided}) AND outcome IS NOT NULL THEN 1 ELSE 0 END) AS d,"
               f" AVG(CASE WHEN outcome_status IN ({decided}) THEN outcome END) AS m,"
               f" AVG(CASE WHEN outcome_status IN ({decided}) THEN outcome * outcome END) AS m2"
               f" FROM sessions WHERE deployment = {p} AND created_at >= {p}"
               " GROUP BY arm, policy_version ORDER BY arm, policy_version")
        with self._read() as conn:
            rows = conn.execute(sql, (deployment, since)).fetchall()
        return [ArmStats(r["arm"], int(r["policy_version"]), int(r["n"]), int(r["d"] or 0),
                         None if r["m"] is None else float(r["m"]),
                         None if r["m2"] is None else float(r["m2"])) for r in rows]


class CanaryStore(Protocol):
    """What production's canary reads and writes of a store (``CanaryMixin`` has it)."""

    def add_canary_decision(self, decision: CanaryDecision, expected_index: int | None = None) -> CanaryDecision:
        ...

    def canary_decisions(self, deployment: str, limit: int | None = None) -> list[CanaryDecision]: ...

    def latest_canary_decisions(self, deployment: str) -> list[CanaryDecision]: ...

    def arm_stats(self, deployment: str, since: float) -> list[ArmStats]: ...
