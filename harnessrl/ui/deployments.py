"""The dashboard's deployments page: per deployment, which version serves which share of new sessions,
the running canary's evidence per arm, and its decisions (read from the store, like every page)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessrl.production.canary_state import canary_state
from harnessrl.store import Store
from harnessrl.store.canary import ArmStats, CanaryDecision

#: Decisions shown per deployment (newest first).
DECISIONS_SHOWN = 20


@dataclass(frozen=True)
class ServedArm:
    arm: str
    version: int | None  # None: the gateway's own version (no canary decided anything yet)
    engine_model: str | None
    fraction: float


@dataclass(frozen=True)
class DeploymentPanel:
    name: str
    run_id: str
    arms: list[ServedArm]
    started_at: float | None = None
    stats: list[ArmStats] = field(default_factory=list)
    decisions: list[CanaryDecision] = field(default_factory=list)


def deployment_panels(store: Store) -> list[DeploymentPanel]:
    list_deployments: Any = getattr(store, "list_deployments", None)
    return [deployment_panel(store, d.name, d.run_id) for d in (list_deployments() if list_deployments else [])]


def deployment_panel(store: Store, name: str, run_id: str) -> DeploymentPanel:
    st = canary_state(store, name)  # type: ignore[arg-type]
    share = st.fraction if st.running else 0.0
    arms = [ServedArm("stable", st.stable_version, st.weights.get("stable_model"), 1.0 - share)]
    stats: list[ArmStats] = []
    if st.running:
        arms.append(ServedArm("canary", st.candidate_version, st.weights.get("candidate_model"), share))
        served = {("stable", st.stable_version), ("canary", st.candidate_version)}
        stats = [a for a in store.arm_stats(name, st.started_at or 0.0) if (a.arm, a.version) in served]
    decisions = list(reversed(store.canary_decisions(name, limit=DECISIONS_SHOWN)))
    return DeploymentPanel(name, run_id, arms, st.started_at, stats, decisions)
