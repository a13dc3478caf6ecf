"""The store interface: the durable record every other part reads and writes.

One interface, two drivers (SQLite embedded, PostgreSQL at scale), one test suite run against both.
Methods are synchronous and thread-safe; the gateway calls them from a writer thread so that a batch of
calls is committed in one transaction (group commit) *before* the harness gets its responses.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

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
    #: ``(prompt_token_ids, their int32 little-endian bytes)`` when the caller packed them already
    #: (``codec.prepacked``): used only while ``prompt_token_ids`` is still that list, so a redaction that
    #: replaces the list (it never mutates one) leaves the store packing what it holds.
    packed_prompt: tuple[list[int], bytes] | None = None

    def prompt_bytes(self) -> bytes | None:
        """The packed prompt, when it is still ``prompt_token_ids``'s."""
        pre = self.packed_prompt
        return pre[1] if pre is not None and pre[0] is self.prompt_token_ids else None


@dataclass(frozen=True, slots=True)
class RolloutStats:
    """What a table of rollouts shows beyond the rollout row: how many calls, which rewards."""

    calls: int
    rewards: list[Reward]


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What some rollouts' recorded calls used, counted without decoding a token: prompt lengths and each
    choice's length outlive a purge (``schema.py``), so a run's cost can be read after its text is gone."""

    calls: int = 0  # every recorded call, whatever its status (refused and failed calls included)
    prompt_tokens: int = 0  # each call's full prompt (a shared prefix counts in every call that sent it)
    completion_tokens: int = 0  # every choice's sampled tokens
    latency_s: float = 0.0  # the recorded latencies summed (the gateway's time per call; calls overlap)
    refused: int = 0  # calls answered with an error before the engine was asked (status "refused")
    clamped: int = 0  # calls whose max_tokens was lowered below what they asked for (a cap, budget, context)
    stopped_at_clamp: int = 0  # of those, the calls whose answer ended at the lowered limit ("length")


def usage_of(status: str, sampling: str | dict[str, Any], finishes: Sequence[str | None]) -> tuple[int, int, int]:
    """(refused, clamped, stopped at the clamp) of one call, from its status, sampling record and finish
    reasons (the sampling record's JSON text is parsed only when it names a lowered limit)."""
    if isinstance(sampling, str):
        sampling = orjson.loads(sampling) if "max_tokens_requested" in sampling else {}
    clamped = int(sampling.get("max_tokens_requested") is not None)
    return int(status == "refused"), clamped, clamped * int("length" in finishes)


class Store(abc.ABC):
    """Durable record of runs, tasks, rollouts, calls, rewards and policy versions (the core).

    Features extend it with their own tables and methods in their own modules, which this one does not
    import: judge calls (``judge_calls.py``), production's deployments, feedback and canary decisions
    (``deployments.py``, ``feedback.py``, ``canary.py``); ``assembly.py`` mixes them into the drivers.
    """

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

    def call_usage(self, rollout_ids: Sequence[str]) -> CallUsage:
        """Calls, prompt and completion tokens and latency of many rollouts' calls, summed (a run's cost).

        Unknown ids count nothing. Drivers override this with a set query; this fallback decodes every call.
        """
        calls = prompt = completion = refused = clamped = stopped = 0
        latency = 0.0
        for rid in dict.fromkeys(rollout_ids):
            try:
                found = self.get_calls(rid)
            except NotFound:
                continue
            calls += len(found)
            prompt += sum(len(c.prompt_token_ids) for c in found)
            completion += sum(len(ch.token_ids) for c in found for ch in c.choices)
            latency += sum(c.latency_s or 0.0 for c in found)
            for c in found:
                r, k, s = usage_of(c.status.value, c.sampling, [ch.finish_reason for ch in c.choices])
                refused, clamped, stopped = refused + r, clamped + k, stopped + s
        return CallUsage(calls, prompt, completion, latency, refused, clamped, stopped)

    # -- calls ----------------------------------------------------------------------------------------
    @abc.abstractmethod
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        """Append calls in one transaction, durable on return; returns each call's index in its rollout.

        A prompt that extends an earlier call of the same rollout is stored as (parent call, prefix
        length, new tokens) so that storage grows linearly with a rollout's turns.
        """

    def record_calls_nowait(self, calls: Sequence[NewCall]) -> list[int] | None:
        """``record_calls`` where it cannot wait (no lock held by another, no disk sync), else ``None``.

        The gateway commits on its event loop this way when nothing else is writing, which spares a
        call the hand-off to its writer thread and back; a store that cannot promise it (a database
        over the network) answers ``None`` and the writer thread records the calls."""
        return None

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
