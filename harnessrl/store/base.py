"""The store interface: the durable record every other part reads and writes.

One interface, two drivers (SQLite embedded, PostgreSQL at scale), one test suite run against both.
Methods are synchronous and thread-safe; the gateway calls them from a writer thread so that a batch of
calls is committed in one transaction (group commit) *before* the harness gets its responses.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessrl.store.canary import ArmStats, CanaryDecision, CanaryState
from harnessrl.store.judge_calls import JudgeCall
from harnessrl.store.retention import PurgeCounts
from harnessrl.types import (
    ApiKind,
    Call,
    CallStatus,
    ChoiceTokens,
    FailureKind,
    Fidelity,
    PolicyVersion,
    Reward,
    Rollout,
    RolloutStatus,
    Run,
    Task,
    TaskSplit,
)

if TYPE_CHECKING:  # feedback.py and deployments.py build on this module's errors
    from harnessrl.store.deployments import AppKey, Deployment, Session, SessionTouch
    from harnessrl.store.feedback import Decide, Feedback, SessionWindow


class StoreError(Exception):
    """Base class of store errors."""


class NotFound(StoreError):
    """The run, rollout or call does not exist."""


class AlreadyExists(StoreError):
    """A run, rollout or policy version with that id (or number) was already created."""


class IllegalTransition(StoreError):
    """A rollout status change that the state machine forbids (e.g. succeeded -> running)."""


class RolloutClosed(StoreError):
    """A write to a rollout that is already in a terminal state."""


class BudgetExceeded(StoreError):
    """Recording this answered call would take its rollout past ``NewCall.max_calls`` / ``max_tokens``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # "calls" or "tokens"


@dataclass(slots=True)
class NewCall:
    """What the gateway hands the store for one finished model call (prompt uncompressed)."""

    rollout_id: str
    api: ApiKind
    status: CallStatus
    request: dict[str, Any]
    response: dict[str, Any] | None
    prompt_token_ids: list[int]
    choices: list[ChoiceTokens]
    policy_version: int
    requested_model: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    engine_id: str | None = None
    latency_s: float | None = None
    error: str | None = None
    fidelity: Fidelity | None = None
    fidelity_reason: str | None = None
    #: The rollout's budgets, checked where every writer sees them (a store shared by several gateways
    #: checks them under the rollout's lock): answered calls, and completion tokens of answered calls.
    max_calls: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class RolloutStats:
    """What a table of rollouts shows beyond the rollout row: how many calls, which rewards."""

    calls: int
    rewards: list[Reward]


class Store(abc.ABC):
    """Durable record of runs, tasks, rollouts, calls, rewards and policy versions."""

    # -- runs and tasks -------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_run(self, name: str, config: dict[str, Any], run_id: str | None = None) -> Run: ...

    @abc.abstractmethod
    def get_run(self, run_id: str) -> Run: ...

    @abc.abstractmethod
    def list_runs(self) -> list[Run]: ...

    @abc.abstractmethod
    def upsert_tasks(self, run_id: str, tasks: Sequence[Task]) -> None: ...

    @abc.abstractmethod
    def list_tasks(self, run_id: str, split: TaskSplit | None = None) -> list[Task]: ...

    # -- rollouts -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_rollout(
        self,
        *,
        task_id: str,
        input: dict[str, Any],
        group_id: str,
        api_key_hash: str,
        policy_version: int = 0,
        run_id: str | None = None,
        step: int | None = None,
        metadata: dict[str, Any] | None = None,
        rollout_id: str | None = None,
    ) -> Rollout:
        """Create a rollout in ``queued``. Only a hash of its API key is stored, never the key."""

    @abc.abstractmethod
    def get_rollout(self, rollout_id: str) -> Rollout: ...

    @abc.abstractmethod
    def rollout_key_hash(self, rollout_id: str) -> str:
        """The stored hash of the rollout's API key (for the gateway's auth check)."""

    @abc.abstractmethod
    def transition_rollout(
        self,
        rollout_id: str,
        status: RolloutStatus,
        *,
        failure_kind: FailureKind | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        logs: str | None = None,
        runner_handle: str | None = None,
    ) -> Rollout:
        """Move a rollout along the state machine; raises ``IllegalTransition`` otherwise."""

    @abc.abstractmethod
    def list_rollouts(
        self,
        *,
        run_id: str | None = None,
        status: RolloutStatus | None = None,
        step: int | None = None,
        limit: int = 100,
        offset: int = 0,
        task_id: str | None = None,
        failure_kind: FailureKind | None = None,
    ) -> list[Rollout]:
        """Rollouts oldest first, filtered by every given field; paged with ``limit``/``offset``."""

    def iter_rollouts(self, *, page: int = 500, **filters: Any) -> Iterator[Rollout]:
        """Every rollout ``list_rollouts(**filters)`` matches, oldest first, read ``page`` at a time (a run
        holds more rollouts than one page; export, SFT selection and the controller read them all)."""
        offset = 0
        while True:
            rows = self.list_rollouts(limit=page, offset=offset, **filters)
            yield from rows
            if len(rows) < page:
                return
            offset += len(rows)

    def rollout_stats(self, rollout_ids: Sequence[str]) -> dict[str, RolloutStats]:
        """Call counts and rewards of many rollouts at once (a dashboard page), without decoding tokens.

        Unknown ids are absent from the result. Drivers override this with two set queries; this
        fallback is correct but decodes every call.
        """
        out: dict[str, RolloutStats] = {}
        for rid in rollout_ids:
            try:
                out[rid] = RolloutStats(len(self.get_calls(rid)), self.get_rewards(rid))
            except NotFound:
                continue
        return out

    # -- calls ----------------------------------------------------------------------------------------
    @abc.abstractmethod
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        """Append calls in one transaction, durable on return; returns each call's index in its rollout.

        A prompt that extends an earlier call of the same rollout is stored as (parent call, prefix
        length, new tokens) so that storage grows linearly with a rollout's turns.
        """

    @abc.abstractmethod
    def get_calls(self, rollout_id: str) -> list[Call]:
        """All calls of a rollout in order, with full prompt token IDs."""

    @abc.abstractmethod
    def get_call(self, rollout_id: str, index: int) -> Call: ...

    # -- rewards --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_reward(
        self, rollout_id: str, value: float, name: str = "reward", call_index: int | None = None
    ) -> Reward: ...

    @abc.abstractmethod
    def get_rewards(self, rollout_id: str) -> list[Reward]: ...

    # -- judge calls (``judge_calls.py``) --------------------------------------------------------------
    @abc.abstractmethod
    def add_judge_calls(self, calls: Sequence[JudgeCall]) -> list[JudgeCall]:
        """Record one judging's rows (one per rollout it scored) in one transaction, numbered per rollout."""

    @abc.abstractmethod
    def get_judge_calls(self, rollout_id: str) -> list[JudgeCall]:
        """A rollout's judge calls, oldest first."""

    @abc.abstractmethod
    def judge_call_rows(self, call_id: str) -> list[JudgeCall]:
        """All rows of one judging by position (position 0 holds its prompt and raw answer)."""

    @abc.abstractmethod
    def cached_judgement(self, cache_key: str) -> list[JudgeCall]:
        """The rows of the newest answered judging with ``cache_key`` (empty: none)."""

    # -- production deployments, app keys, sessions (``deployments.py``) ------------------------------
    @abc.abstractmethod
    def create_deployment(self, name: str, config: dict[str, Any]) -> Deployment:
        """Create a deployment and its run ``production:<name>``; ``AlreadyExists`` if the name is taken."""

    @abc.abstractmethod
    def get_deployment(self, name: str) -> Deployment: ...

    @abc.abstractmethod
    def list_deployments(self) -> list[Deployment]: ...

    @abc.abstractmethod
    def add_app_key(self, deployment: str, key_hash: str, label: str) -> AppKey:
        """Store an app key of ``deployment`` by its hash only."""

    @abc.abstractmethod
    def find_app_key(self, key_hash: str) -> AppKey | None:
        """The key with this hash, revoked or not; None if there is none."""

    @abc.abstractmethod
    def list_app_keys(self, deployment: str) -> list[AppKey]: ...

    @abc.abstractmethod
    def revoke_app_key(self, deployment: str, key_id: str) -> AppKey: ...

    @abc.abstractmethod
    def open_session(self, deployment: str, session_id: str, *, key_id: str, arm: str, policy_version: int,
                     recorded: bool, window_s: float, rollout_key_hash: str) -> tuple[Session, bool]:
        """The session, created with its running rollout (when recorded) on its first call (True) or as
        another call created it (False)."""

    @abc.abstractmethod
    def get_session(self, deployment: str, session_id: str) -> Session: ...

    @abc.abstractmethod
    def touch_sessions(self, touches: Sequence[SessionTouch], window_s: float) -> int:
        """Count calls of open sessions and move their feedback windows forward; how many were open."""

    @abc.abstractmethod
    def list_sessions(self, deployment: str, *, recorded: bool | None = None, limit: int = 100,
                      offset: int = 0) -> list[Session]: ...

    # -- production feedback (``feedback.py``) ---------------------------------------------------------
    @abc.abstractmethod
    def add_feedback(self, deployment: str, session_id: str, name: str, value: float,
                     now: float | None = None) -> Feedback:
        """Record one signal on a session, numbered per session; ``NotFound`` (unknown session) or
        ``FeedbackWindowClosed`` (after its window)."""

    @abc.abstractmethod
    def get_feedback(self, deployment: str, session_id: str) -> list[Feedback]:
        """A session's signals, oldest first."""

    @abc.abstractmethod
    def get_session_window(self, deployment: str, session_id: str) -> SessionWindow:
        """A session's window, outcome and trained mark."""

    @abc.abstractmethod
    def due_windows(self, now: float, deployment: str | None = None, limit: int = 500) -> list[SessionWindow]:
        """Open sessions whose feedback window closed by ``now``, earliest first."""

    @abc.abstractmethod
    def close_window(self, deployment: str, session_id: str, decide: Decide,
                     now: float | None = None) -> SessionWindow | None:
        """Decide a due session's outcome in one transaction (reward and rollout close when recorded)."""

    @abc.abstractmethod
    def trainable_sessions(self, deployment: str, min_version: int, limit: int = 1000) -> list[SessionWindow]:
        """Recorded, decided, untrained sessions served by ``min_version`` or later."""

    @abc.abstractmethod
    def drop_stale_sessions(self, deployment: str, min_version: int) -> int:
        """Mark the untrained sessions served before ``min_version`` as stale; how many."""

    @abc.abstractmethod
    def mark_sessions_trained(self, deployment: str, session_ids: Sequence[str], version: int) -> int:
        """Mark sessions as used by the update that produced ``version``."""

    @abc.abstractmethod
    def trained_outcomes(self, deployment: str) -> list[tuple[int, float]]:
        """``(trained_version, outcome)`` of the trained sessions, by version."""

    # -- canary decisions (``canary.py``) -------------------------------------------------------------
    @abc.abstractmethod
    def add_canary_decision(self, decision: CanaryDecision, expected_index: int | None = None) -> CanaryDecision:
        """Record a deployment's canary decision, numbered after its last one (``expected_index``: refuse
        with ``CanaryConflict`` when another writer recorded one since)."""

    @abc.abstractmethod
    def canary_decisions(self, deployment: str, limit: int | None = None) -> list[CanaryDecision]:
        """A deployment's canary decisions, oldest first (``limit``: the newest ones only)."""

    @abc.abstractmethod
    def canary_state(self, deployment: str) -> CanaryState:
        """Which versions serve the deployment now, from its newest decision."""

    @abc.abstractmethod
    def arm_stats(self, deployment: str, since: float) -> list[ArmStats]:
        """Per arm and version: sessions created since ``since``, how many decided, their mean outcome."""

    # -- policy versions ------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_policy_version(
        self,
        version: int,
        checkpoint_path: str | None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> PolicyVersion: ...

    @abc.abstractmethod
    def list_policy_versions(self, run_id: str | None = None) -> list[PolicyVersion]: ...

    # -- retention ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def end_run(self, run_id: str, ended: bool = True) -> Run:
        """Say that a run is done (its calls may now be purged) or, ``ended=False``, that it goes on."""

    @abc.abstractmethod
    def purge(
        self,
        *,
        finished_before: float,
        run_ids: Sequence[str | None] | None = None,
        dry_run: bool = True,
        batch_rollouts: int = 100,
    ) -> PurgeCounts:
        """Empty the calls (text, token arrays) and logs of every rollout that finished before
        ``finished_before`` and whose run has ended; ``run_ids`` limits it to those runs (``None`` in it:
        rollouts without a run). ``dry_run`` only counts. Rules: ``retention.py``."""

    def reclaim_space(self, full: bool = False) -> str:
        """Give freed space back to the file system where the database can; says what it did."""
        return ""

    # -- housekeeping ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def storage_bytes(self, rollout_id: str) -> int:
        """Bytes of token data stored for a rollout (to check linear growth)."""

    @abc.abstractmethod
    def close(self) -> None: ...
