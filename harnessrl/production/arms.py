"""Which version serves a session: the stable one, or a canary candidate (``canary.py`` decides).

A session keeps its arm for life (stored in ``sessions``), so an arm is assigned once, on a session's
first call. Without a running canary every session is ``stable`` at the current version. The plan is
also the gateway's handle on the canary: its admin routes, its periodic evaluation and its metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessrl.production.canary import CANARY, STABLE, Canary
from harnessrl.production.canary_weights import VersionLoader
from harnessrl.production.config import CanaryConfig

if TYPE_CHECKING:
    from harnessrl.store.base import Store
    from harnessrl.store.canary import CanaryDecision

__all__ = ["CANARY", "STABLE", "ArmPlan", "Assignment"]


@dataclass(frozen=True)
class Assignment:
    """What serves one session: its arm, the policy version, and the engine model name (None: the
    gateway's default ``engine_model``)."""

    arm: str
    version: int
    engine_model: str | None = None


class ArmPlan:
    """Assigns new sessions to arms from the deployment's canary state (``Canary``); ``stable_version``:
    the version of a deployment that never had a canary (the gateway's own). ``loader`` brings candidate
    versions into the engines (None: only candidates the engines already serve can start)."""

    def __init__(self, store: Store | None, stable_version: Callable[[], int], config: CanaryConfig | None = None,
                 loader: VersionLoader | None = None) -> None:
        self.store = store
        self.stable_version = stable_version
        self.config = config or CanaryConfig()
        self.canary = Canary(store, self.config, loader, stable_version) if store is not None else None

    def assign(self, deployment: str, session_id: str) -> Assignment:
        """The arm of a new session (called once, on its first call, in a worker thread)."""
        if self.canary is None:
            return Assignment(STABLE, self.stable_version())
        arm = self.canary.assign(deployment, session_id)
        return Assignment(arm.arm, arm.version, arm.engine_model)

    def resumed(self, deployment: str, arm: str, version: int) -> Assignment:
        """What serves a session the store already holds (opened earlier, or by another gateway): its
        version while that is still served, else the stable version (its candidate was rolled back, or a
        newer version promoted) -- each call is recorded with the version that served it."""
        if self.canary is None:
            return Assignment(arm, version)
        now = self.canary.serving(deployment, arm, version)
        return Assignment(arm, now.version, now.engine_model)

    def epoch(self, deployment: str) -> int:
        """Changes whenever what serves the deployment's arms changes (a start, promote or rollback): a
        live session pinned at another epoch should ask ``resumed`` again before its next call, since its
        version's adapter may have been dropped from the engines."""
        return 0 if self.canary is None else self.canary.epochs.get(deployment, 0)

    async def evaluate(self) -> list[CanaryDecision]:
        """The periodic pass (``[production.canary] evaluate_interval_s``): decide running canaries."""
        if self.canary is None:
            return []
        return await asyncio.to_thread(self.canary.evaluate_all)

    def metric_lines(self) -> list[str]:
        return [] if self.canary is None else self.canary.metric_lines()
