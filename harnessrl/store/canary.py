"""Canary decisions: which version serves which fraction of a deployment's sessions, and why.

Every evaluation of a canary is a row of ``canary_decisions``, numbered per deployment under the
deployment's row lock: ``start`` (a candidate begins serving ``fraction`` of new sessions), ``hold``
(evaluated, not enough evidence or not yet decided), ``promote`` (the candidate becomes the stable
version), ``rollback`` (the candidate is dropped). The current state is read back from the newest row,
so a restarted gateway serves what it served before. ``stats`` is the evidence as JSON: the sessions and
mean outcome per arm, and where each arm's weights live (``weights``: an adapter folder, so a restarted
engine can load them again). The per-arm statistics read ``sessions`` (``deployments.py`` writes it).
The table is in ``schema.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from harnessrl.store.mixin import SqlMixin

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike

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
class CanaryState:
    """What serves a deployment now, read from its newest decision.

    ``stable_version`` None: no decision yet (the gateway's own version serves everything).
    ``candidate_version`` is set while a canary runs (after ``start`` or ``hold``); ``started_at`` is when
    it started (per-arm statistics count sessions created since then). ``weights`` maps ``stable`` and
    ``candidate`` to their adapter folders (None: the engine's own model, or weights held in memory only)
    and ``stable_model``/``candidate_model`` to the model names the engines serve them under (None: the
    gateway's default model).
    """

    stable_version: int | None = None
    candidate_version: int | None = None
    fraction: float = 0.0
    started_at: float | None = None
    weights: dict[str, Any] = field(default_factory=dict)
    last: CanaryDecision | None = None

    @property
    def running(self) -> bool:
        return self.candidate_version is not None


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


def state_of(decisions: Sequence[CanaryDecision]) -> CanaryState:
    """The serving state after ``decisions`` (oldest first): what the newest one left running."""
    if not decisions:
        return CanaryState()
    last = decisions[-1]
    weights = dict(last.stats.get("weights") or {})
    if last.action in ("start", "hold"):
        start = next((d for d in reversed(decisions) if d.action == "start"), last)
        return CanaryState(last.stable_version, last.candidate_version, last.fraction, start.created_at,
                           weights, last)
    if last.action == "promote":
        return CanaryState(last.candidate_version, None, 0.0, None, _stable_weights(weights, "candidate"), last)
    return CanaryState(last.stable_version, None, 0.0, None, _stable_weights(weights, "stable"), last)


def _stable_weights(weights: dict[str, Any], arm: str) -> dict[str, Any]:
    """What the stable arm serves after a promote (the candidate's) or a rollback (the stable one's)."""
    return {"stable": weights.get(arm), "stable_model": weights.get(f"{arm}_model")}


class CanaryMixin(SqlMixin):
    """The canary methods of ``SqlStore`` drivers (mixed in before ``SqlStore``)."""

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

    def canary_state(self, deployment: str) -> CanaryState:
        """What serves the deployment now (from its newest decision and the latest ``start``)."""
        p = self.P
        with self._read() as conn:
            last = conn.execute(f"SELECT * FROM canary_decisions WHERE deployment = {p} ORDER BY decision_index"
                                " DESC LIMIT 1", (deployment,)).fetchone()  # fmt: skip
            if last is None:
                return CanaryState()
            start = conn.execute(f"SELECT * FROM canary_decisions WHERE deployment = {p} AND action = 'start'"
                                 " ORDER BY decision_index DESC LIMIT 1", (deployment,)).fetchone()  # fmt: skip
        decisions = [_decision(start)] if start is not None else []
        return state_of([*decisions, _decision(last)])

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
