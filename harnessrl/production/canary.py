"""Safe rollout of a new version: a canary candidate serves a fraction of new sessions until the outcomes
of both arms decide whether it is promoted (it becomes the stable version) or rolled back (dropped).

This module orchestrates; its parts are the statistics (``canary_stats.py``: which sessions join the
candidate's arm, the rule that decides) and the loading of versions into the engines
(``canary_weights.py``: ``Weights``, the embedded engine's named adapters, vLLM's hot-loaded LoRAs).

- **Arms.** A session keeps its arm (``arms.py``).
- **Durable.** Every decision is a row of ``canary_decisions`` with its evidence, and the state is read back
  from the store after a restart (the adapters are loaded again from their folders).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harnessrl.production.canary_state import CanaryState, canary_state
from harnessrl.production.canary_stats import decide, in_canary
from harnessrl.production.canary_weights import (
    CanaryError,
    VersionLoader,
    Weights,
    adapter_folder,
    adapter_name,
)
from harnessrl.production.config import CanaryConfig
from harnessrl.store.canary import ArmStats, CanaryConflict, CanaryDecision

if TYPE_CHECKING:
    from harnessrl.store.base import Store

log = logging.getLogger(__name__)

STABLE = "stable"
CANARY = "canary"


@dataclass(frozen=True, slots=True)
class Arm:
    """What serves one arm of a deployment now: its version, engine model (None: the gateway's default)
    and the share of new sessions it gets."""

    arm: str
    version: int
    engine_model: str | None
    fraction: float


class Canary:
    """Canaries of every deployment of one gateway: start, assign, evaluate, promote or roll back.

    ``default_version``: the version serving a deployment that never had a canary (the gateway's own).
    ``loader``: how versions reach the engines (None: only candidates already served under a given
    ``engine_model`` can start). State is cached per deployment and read from the store on first use.
    """

    def __init__(self, store: Store, config: CanaryConfig | None = None, loader: VersionLoader | None = None,
                 default_version: Callable[[], int] = lambda: 0) -> None:
        self.store = store
        self.config = config or CanaryConfig()
        self.loader = loader
        self.default_version = default_version
        self._states: dict[str, CanaryState] = {}
        self._loaded: dict[str, str] = {}  # engine model names loaded by this process -> their deployment
        #: Per deployment, how many times what serves its arms changed in this process: a live session
        #: pinned at an older epoch asks ``serving`` again (its candidate may be gone).
        self.epochs: dict[str, int] = {}
        self._lock = threading.RLock()

    # -- state --------------------------------------------------------------------------------------------
    def state(self, deployment: str) -> CanaryState:
        st = self._states.get(deployment)  # the serving path: no lock, no I/O once known
        if st is not None:
            return st
        with self._lock:
            st = self._states.get(deployment)
            if st is None:
                st = canary_state(self.store, deployment)
                self._restore(deployment, st)
                self._states[deployment] = st
            return st

    def restore_all(self) -> None:
        """Read every deployment's state and load the adapters it serves (at gateway start, off the loop)."""
        list_deployments = getattr(self.store, "list_deployments", None)
        for d in list_deployments() if list_deployments is not None else []:
            self.state(d.name)

    def _restore(self, deployment: str, st: CanaryState) -> None:
        """After a restart: load the adapters the stored state serves (their folders are in the decisions)."""
        for arm, version in ((STABLE, st.stable_version), (CANARY, st.candidate_version)):
            path, name = st.weights.get(arm if arm == STABLE else "candidate"), self._model(arm, st)
            if version is None or path is None or name is None or self.loader is None:
                continue
            if name not in self._loaded:
                try:
                    self.loader.load(name, version, Weights(path))
                    self._loaded[name] = deployment
                except Exception as exc:  # noqa: BLE001 - serve the rest; the operator sees the log
                    log.error("deployment %s: cannot load %s version %d from %s again: %s", deployment, arm,
                              version, path, exc)

    def stable_version(self, deployment: str) -> int:
        st = self.state(deployment)
        return self.default_version() if st.stable_version is None else st.stable_version

    def arms(self, deployment: str) -> list[Arm]:
        """What serves which share of the deployment's new sessions now."""
        st = self.state(deployment)
        stable = Arm(STABLE, self.stable_version(deployment), self._model(STABLE, st),
                     1.0 - st.fraction if st.running else 1.0)
        if not st.running:
            return [stable]
        assert st.candidate_version is not None
        return [stable, Arm(CANARY, st.candidate_version, self._model(CANARY, st), st.fraction)]

    @staticmethod
    def _model(arm: str, st: CanaryState) -> str | None:
        """The engine model serving an arm (stable None: the gateway's default, the engine's own model)."""
        return st.weights.get("candidate_model" if arm == CANARY else "stable_model")

    def assign(self, deployment: str, session_id: str) -> Arm:
        """The arm of a new session."""
        arms = self.arms(deployment)
        if len(arms) == 2 and in_canary(deployment, arms[1].version, session_id, arms[1].fraction):
            return arms[1]
        return arms[0]

    def serving(self, deployment: str, arm: str, version: int) -> Arm:
        """What serves a later call of a session assigned ``(arm, version)``: that version while it is
        still served, else the stable arm (its candidate was rolled back, or a newer version promoted)."""
        for a in self.arms(deployment):
            if a.version == version and (a.arm == arm or a.arm == STABLE):
                return a
        return self.arms(deployment)[0]

    # -- decisions ----------------------------------------------------------------------------------------
    def start(self, deployment: str, version: int, weights: Weights | None = None, *,
              engine_model: str | None = None, fraction: float | None = None) -> CanaryDecision:
        """Serve ``version`` to ``fraction`` of new sessions beside the stable version (loading its weights
        unless ``engine_model`` names a model the engines already serve). A running canary is replaced:
        its candidate is rolled back first (recorded)."""
        fraction = self.config.fraction if fraction is None else fraction
        if not 0.0 < fraction < 1.0:
            raise CanaryError(f"fraction must be in (0, 1), got {fraction}")
        with self._lock:
            st = self._sync(deployment)
            stable = self.stable_version(deployment)
            if version <= stable:
                raise CanaryError(f"candidate version {version} must be newer than the stable version {stable} "
                                  f"of deployment {deployment!r}")
            if st.running:
                if st.candidate_version == version:
                    raise CanaryError(f"version {version} is already the canary of {deployment!r}")
                replaced = self._record(deployment, "rollback", st, self._evidence(deployment, st),
                                        f"replaced by candidate version {version} before a decision")
                st = self._apply_rollback(deployment, st, replaced)
            name = engine_model or adapter_name(deployment, version)
            if engine_model is None:
                if self.loader is None:
                    raise CanaryError("this gateway cannot load versions into its engines (no embedded engine "
                                      "in this process, no vLLM URLs): pass engine_model, a model name the "
                                      "engines already serve")
                if weights is None:
                    weights = self._weights_of(deployment, version)
                if weights.path is None:
                    log.warning("deployment %s: candidate version %d has no adapter folder; a restarted "
                                "gateway cannot serve it again", deployment, version)
                self.loader.load(name, version, weights)
                self._loaded[name] = deployment
            w: dict[str, Any] = {"stable": st.weights.get("stable"), "stable_model": st.weights.get("stable_model"),
                                 "candidate": weights.path if weights else None, "candidate_model": name}
            started = CanaryState(stable, version, fraction, None, w, st.last)
            decision = self._record(deployment, "start", started, {"arms": []},
                                    f"version {version} serves {fraction:g} of new sessions beside stable "
                                    f"version {stable}")
            self._states[deployment] = CanaryState(stable, version, fraction, decision.created_at, w, decision)
            self._bump(deployment)
            log.info("deployment %s: canary version %d started (%g of new sessions)", deployment, version,
                     fraction)
            return decision

    def _weights_of(self, deployment: str, version: int) -> Weights:
        """A version published by a run: its checkpoint folder from ``policy_versions`` of the
        deployment's run (``<folder>/adapter_config.json`` must exist)."""
        run_id = self._run_id(deployment)
        for v in self.store.list_policy_versions(run_id):
            if v.version == version and v.checkpoint_path:
                return Weights(adapter_folder(v.checkpoint_path))
        raise CanaryError(f"version {version} of deployment {deployment!r} has no checkpoint in the store "
                          "(policy_versions of its run): publish it first, or give its adapter folder")

    def _run_id(self, deployment: str) -> str | None:
        get = getattr(self.store, "get_deployment", None)
        return get(deployment).run_id if get is not None else None

    def evaluate(self, deployment: str) -> CanaryDecision | None:
        """Compare the arms and act (promote, roll back) or hold; None when no canary runs or no outcome
        was decided since the last hold (an unchanged hold is not recorded again)."""
        with self._lock:
            st = self._sync(deployment)
            if not st.running:
                return None
            evidence = self._evidence(deployment, st)
            s, c = (_arm(evidence, STABLE), _arm(evidence, CANARY))
            verdict = decide(s, c, self.config)
            if verdict.action == "hold" and st.last is not None and st.last.action == "hold" \
                    and _decided(st.last.stats) == _decided(evidence):
                return None  # no outcome decided since the last hold: nothing new to record
            try:
                decision = self._record(deployment, verdict.action, st, evidence, verdict.reason)
            except CanaryConflict:  # another gateway on this database decided first: follow it
                self._sync(deployment)
                return None
            if verdict.action == "promote":
                self._apply_promote(deployment, st, decision)
            elif verdict.action == "rollback":
                self._apply_rollback(deployment, st, decision)
            else:
                self._states[deployment] = replace(st, last=decision)
            log.info("deployment %s: canary %s (%s)", deployment, verdict.action, verdict.reason)
            return decision

    def evaluate_all(self) -> list[CanaryDecision]:
        """Evaluate every deployment with a running canary (the gateway's periodic task)."""
        with self._lock:
            names = [d for d, st in self._states.items() if st.running]
        list_deployments = getattr(self.store, "list_deployments", None)
        if list_deployments is not None:
            names = sorted(set(names) | {d.name for d in list_deployments()})
        out = [self.evaluate(d) for d in names]
        return [d for d in out if d is not None]

    def _evidence(self, deployment: str, st: CanaryState) -> dict[str, Any]:
        stats = self.store.arm_stats(deployment, st.started_at or 0.0)
        stable_v = self.stable_version(deployment)
        arms = [a.as_dict() for a in stats if (a.arm, a.version) in ((STABLE, stable_v),
                                                                      (CANARY, st.candidate_version))]
        return {"arms": arms}

    def _record(self, deployment: str, action: str, st: CanaryState, evidence: dict[str, Any],
                reason: str) -> CanaryDecision:
        """Store a decision after ``st.last`` (``CanaryConflict`` when another gateway wrote one since)."""
        stable = st.stable_version if st.stable_version is not None else self.default_version()
        return self.store.add_canary_decision(CanaryDecision(
            deployment, action, stable, st.candidate_version, st.fraction, {**evidence, "weights": st.weights},
            reason), expected_index=0 if st.last is None else st.last.index + 1)

    def _sync(self, deployment: str) -> CanaryState:
        """The stored state, adopted when another gateway on the same database decided since this one last
        looked: load what it serves, drop what it no longer serves."""
        cached = self.state(deployment)
        fresh = canary_state(self.store, deployment)
        if _index(fresh) == _index(cached):
            return cached
        if _serving(fresh) == _serving(cached):  # another gateway's hold
            st = self._states[deployment] = replace(cached, last=fresh.last)
            return st
        self._restore(deployment, fresh)
        keep = {self._model(STABLE, fresh), self._model(CANARY, fresh) if fresh.running else None}
        for name in [n for n, d in self._loaded.items() if d == deployment and n not in keep]:
            self._drop(name)
        self._states[deployment] = fresh
        self._bump(deployment)
        log.info("deployment %s: following a canary decision of another gateway (%s)", deployment,
                 fresh.last.action if fresh.last else "none")
        return fresh

    def _apply_promote(self, deployment: str, st: CanaryState, decision: CanaryDecision) -> CanaryState:
        old = self._model(STABLE, st)
        w = {"stable": st.weights.get("candidate"), "stable_model": st.weights.get("candidate_model")}
        new = self._states[deployment] = CanaryState(st.candidate_version, None, 0.0, None, w, decision)
        self._bump(deployment)
        if old is not None and old in self._loaded:
            self._drop(old)
        return new

    def _apply_rollback(self, deployment: str, st: CanaryState, decision: CanaryDecision) -> CanaryState:
        new = self._states[deployment] = CanaryState(
            st.stable_version, None, 0.0, None,
            {"stable": st.weights.get("stable"), "stable_model": st.weights.get("stable_model")}, decision)
        self._bump(deployment)
        name = self._model(CANARY, st)
        if name in self._loaded:
            self._drop(name)
        return new

    def _bump(self, deployment: str) -> None:
        self.epochs[deployment] = self.epochs.get(deployment, 0) + 1

    def _drop(self, name: str) -> None:
        self._loaded.pop(name, None)
        if self.loader is not None:
            try:
                self.loader.drop(name)
            except Exception as exc:  # noqa: BLE001 - what serves is already switched; the adapter lingers
                log.warning("could not drop %s from the engines: %s", name, exc)

    # -- reading ------------------------------------------------------------------------------------------
    def describe(self, deployment: str, decisions: int = 50) -> dict[str, Any]:
        """The admin API's and dashboard's view: which version serves which share, evidence, decisions."""
        st = self.state(deployment)
        arms = self.arms(deployment)
        stats = self._evidence(deployment, st)["arms"] if st.running else []
        return {
            "deployment": deployment,
            "running": st.running,
            "arms": [{"arm": a.arm, "version": a.version, "engine_model": a.engine_model,
                      "fraction": a.fraction} for a in arms],
            "started_at": st.started_at,
            "stats": stats,
            "rule": {"min_sessions": self.config.min_sessions, "max_regression": self.config.max_regression,
                     "confidence": self.config.confidence,
                     "max_sessions": self.config.decide_by_mean_at if self.config.confidence is not None else None},
            "decisions": [decision_json(d) for d in self.store.canary_decisions(deployment, limit=decisions)],
        }

    def metric_lines(self) -> list[str]:
        """Prometheus lines: version and share of new sessions per deployment and arm."""
        lines = []
        with self._lock:
            names = sorted(self._states)
        for d in names:
            for a in self.arms(d):
                label = f'deployment="{d}",arm="{a.arm}"'
                lines += [f"harnessrl_canary_version{{{label}}} {a.version}",
                          f"harnessrl_canary_fraction{{{label}}} {a.fraction:g}"]
        return lines


def _index(st: CanaryState) -> int:
    return -1 if st.last is None else st.last.index


def _serving(st: CanaryState) -> tuple[Any, ...]:
    """What a state serves (two states alike here route every session alike)."""
    return (st.stable_version, st.candidate_version, st.fraction, st.started_at, sorted(st.weights.items()))


def _decided(evidence: dict[str, Any]) -> list[tuple[str, int, int, float | None]]:
    """The part of the evidence a decision rests on (sessions still open only count as served)."""
    return sorted((a["arm"], a["version"], a["decided"], a["mean"]) for a in evidence.get("arms", []))


def _arm(evidence: dict[str, Any], arm: str) -> ArmStats | None:
    for a in evidence["arms"]:
        if a["arm"] == arm:
            return ArmStats(a["arm"], a["version"], a["sessions"], a["decided"], a["mean"], a.get("mean_sq"))
    return None


def decision_json(d: CanaryDecision) -> dict[str, Any]:
    return {"index": d.index, "action": d.action, "stable_version": d.stable_version,
            "candidate_version": d.candidate_version, "fraction": d.fraction, "reason": d.reason,
            "arms": d.stats.get("arms", []), "created_at": d.created_at,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d.created_at)) if math.isfinite(
                d.created_at) else None}
