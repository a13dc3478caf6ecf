"""Which version serves a session: the stable one, or a canary candidate (``canary.py`` decides).

A session keeps its arm for life (stored in ``sessions``), so an arm is assigned once, on a session's
first call. Without a running canary every session is ``stable`` at the current policy version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessrl.store.base import Store

STABLE = "stable"
CANARY = "canary"


@dataclass(frozen=True)
class Assignment:
    """What serves one session: its arm, the policy version, and the engine model name (None: the
    gateway's default ``engine_model``)."""

    arm: str
    version: int
    engine_model: str | None = None


class ArmPlan:
    """Assigns new sessions to arms. This default serves every session from the stable version."""

    def __init__(self, store: Store | None, stable_version: Callable[[], int]) -> None:
        self.store = store
        self.stable_version = stable_version

    def assign(self, deployment: str, session_id: str) -> Assignment:
        return Assignment(STABLE, self.stable_version())
