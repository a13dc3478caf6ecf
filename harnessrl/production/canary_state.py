"""What serves a deployment now, read from its canary decisions (the canary's state machine).

The store keeps the decisions (``store/canary.py``); which versions they leave serving is this module's
rule: after ``start`` or ``hold`` the candidate serves ``fraction`` of new sessions beside the stable
version (since the latest ``start``); after ``promote`` the candidate is the stable version; after
``rollback`` the stable version serves alone. A restarted gateway reads its state back this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessrl.store.canary import CanaryDecision, CanaryStore


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


def canary_state(store: CanaryStore, deployment: str) -> CanaryState:
    """What serves ``deployment`` now (from its newest decision and the latest ``start``)."""
    return state_of(store.latest_canary_decisions(deployment))


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
