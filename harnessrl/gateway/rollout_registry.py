"""What the gateway keeps in memory about each live rollout: key hash, budgets used, recent tokens.

Loaded from the store on a rollout's first request (so a restarted gateway continues where it was) and
dropped when the rollout closes. This keeps the store off the hot path: a call costs one store write.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harnessrl.gateway.errors import Forbidden, NotFoundError, RolloutClosedError, Unauthorized
from harnessrl.gateway.fidelity import KEEP, PromptHistory
from harnessrl.store.base import NotFound, Store
from harnessrl.types import Call

#: How many earlier prompt+completion sequences are kept per rollout for the fidelity check.
HISTORY = KEEP
#: Live rollouts kept in memory; older ones are reloaded from the store on demand.
MAX_CACHED = 50_000


def pinned_sampling(metadata: dict[str, Any]) -> dict[str, Any]:
    """The ``sampling`` object of a rollout's metadata (validated at creation), or nothing."""
    value = metadata.get("sampling")
    return dict(value) if isinstance(value, dict) else {}


def new_api_key() -> str:
    return "hrl-" + secrets.token_urlsafe(24)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(eq=False)
class RolloutState:
    id: str
    key_hash: str
    closed: bool = False
    calls: int = 0  # calls admitted (reserved at start)
    tokens: int = 0  # completion tokens sampled
    history: PromptHistory = field(default_factory=PromptHistory)
    #: Sampling parameters pinned for this rollout by whoever created it (e.g. greedy for evaluation);
    #: they override the harness's own and the gateway-wide ``pinned_sampling``.
    sampling: dict[str, Any] = field(default_factory=dict)
    #: Responses API answers by id -> the chat conversation they end, as JSON (for ``previous_response_id``;
    #: the last few, ``apis.responses.keep_conversation``).
    responses: dict[str, bytes] = field(default_factory=dict)
    recalled_bytes: int = 0  # recorded calls read back for old previous_response_ids (limits.max_recall_bytes)
    #: Production sessions (``harnessrl/production``): False when the session is not sampled for
    #: recording -- served like any call, nothing stored. ``engine_model``/``version``: what serves the
    #: session when its arm names its own model (a canary); None: the gateway's model and version.
    record: bool = True
    engine_model: str | None = None
    version: int | None = None


class RolloutRegistry:
    def __init__(self, store: Store) -> None:
        self._store = store
        #: Called with (state, calls) when a live rollout is loaded from the store (after a gateway restart:
        #: the renderer rebuilds its token history, the Responses API its kept responses).
        self.on_load: Callable[[RolloutState, list[Call]], None] | None = None
        #: Called with a rollout's id when it closes (the renderer drops its token history).
        self.on_close: Callable[[str], None] | None = None
        self._states: dict[str, RolloutState] = {}
        self._loading: dict[str, asyncio.Future[RolloutState]] = {}

    async def authorize(self, rollout_id: str, api_key: str | None) -> RolloutState:
        """The rollout's state if ``api_key`` opens it; 401/403/404/410 otherwise."""
        if not api_key:
            raise Unauthorized(
                "missing API key: send the rollout's api_key as 'Authorization: Bearer <key>' or 'x-api-key'"
            )
        state = self._states.get(rollout_id)
        if state is None:
            state = await self._load(rollout_id)
        if not hmac.compare_digest(state.key_hash, hash_key(api_key)):
            raise Forbidden(f"this API key does not open rollout {rollout_id!r}")
        if state.closed:
            raise RolloutClosedError(f"rollout {rollout_id!r} is finished; it accepts no more calls")
        return state

    async def load(self, rollout_id: str) -> RolloutState:
        """The live rollout's state, loaded from the store if needed, without a key check (production
        sessions are authorized by their app key before they reach their rollout)."""
        state = self._states.get(rollout_id)
        return state if state is not None else await self._load(rollout_id)

    def drop(self, rollout_id: str) -> None:
        """Forget an idle rollout's memory; its next call loads it again from the store."""
        self._states.pop(rollout_id, None)
        if self.on_close is not None:
            self.on_close(rollout_id)

    def add(self, state: RolloutState) -> None:
        if len(self._states) >= MAX_CACHED:
            self._states.pop(next(iter(self._states)))
        self._states[state.id] = state

    def read_calls(self, rollout_id: str) -> list[Call]:
        """A rollout's recorded calls (blocking: run it in a thread)."""
        return self._store.get_calls(rollout_id)

    def mark_closed(self, rollout_id: str) -> None:
        """Drop a finished rollout's memory (its history can be large), remembering only that it closed."""
        state = self._states.get(rollout_id)
        if state is not None:
            state.closed = True
            state.history.clear()
            state.responses.clear()
        if self.on_close is not None:
            self.on_close(rollout_id)

    async def _load(self, rollout_id: str) -> RolloutState:
        fut = self._loading.get(rollout_id)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._loading[rollout_id] = fut
        try:
            state = await asyncio.to_thread(self._load_sync, rollout_id)
            self.add(state)
            fut.set_result(state)
            return state
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved when nobody else waits
            raise
        finally:
            self._loading.pop(rollout_id, None)

    def _load_sync(self, rollout_id: str) -> RolloutState:
        try:
            rollout = self._store.get_rollout(rollout_id)
            key_hash = self._store.rollout_key_hash(rollout_id)
        except NotFound:
            raise NotFoundError(f"unknown rollout {rollout_id!r}; create it with POST /admin/rollouts") from None
        state = RolloutState(id=rollout_id, key_hash=key_hash, closed=rollout.status.terminal,
                             sampling=pinned_sampling(rollout.metadata))
        if not state.closed:
            calls = self._store.get_calls(rollout_id)
            if self.on_load is not None and calls:
                self.on_load(state, calls)
            state.calls = len(calls)
            state.tokens = sum(len(ch.token_ids) for c in calls for ch in c.choices)
            for c in calls[-HISTORY:]:
                if c.prompt_token_ids:
                    state.history.append(c.prompt_token_ids + c.completion_token_ids)
        return state
