"""Sessions: which conversation a production call belongs to, and whether it is recorded.

A call names its session in the base URL (``/p/<d>/s/<session>/v1``, for apps configured only by
``OPENAI_BASE_URL``), else in a header (``X-Session-Id``), else the gateway derives one from the
conversation's opening (system text + first user message + the app key), ``p-<hex>``. A derived session
that has gone idle (``session_idle_s``) or whose feedback window closed is over: the same opening then
starts the next one (``p-<hex>.1``, ...). A named session that is over is refused (409): its id is spent.

A session is opened in the store on its first call (``Store.open_session``: arm, version, and a running
rollout when it is sampled for recording); its rollout state then lives here, so later calls cost no
store read. Calls are counted in memory and written in batches (``flush``), which also moves the
session's feedback window; idle sessions are dropped from memory (``sweep``) and reloaded on demand.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from harnessrl.gateway.errors import BadRequest, GatewayError
from harnessrl.gateway.rollout_registry import RolloutRegistry, RolloutState
from harnessrl.production.arms import ArmPlan, Assignment
from harnessrl.production.config import ProductionConfig
from harnessrl.store.base import NotFound, Store
from harnessrl.store.deployments import Session, SessionTouch
from harnessrl.store.feedback import OPEN
from harnessrl.types import ApiKind

log = logging.getLogger(__name__)

#: A session id: what an application may send, and what the gateway derives.
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
#: The ``api_key_hash`` of a session's rollout: no SHA-256 hex digest equals it, so no key opens the
#: rollout's ``/r/`` routes (production calls are authorized by their app key).
NO_ROLLOUT_KEY = "production-session:no-key"
#: Derived sessions whose current generation is remembered, and live sessions kept in memory, at most.
MAX_CACHED = 50_000


class SessionClosed(GatewayError):
    """A named session whose feedback window closed: its id cannot take more calls."""

    status, code = 409, "session_closed"


def check_session_id(value: str, where: str) -> str:
    if not SESSION_ID.match(value):
        raise BadRequest(f"bad session id in {where}: 1-128 characters of letters, digits, '.', '_', ':', '-'",
                         code="bad_session_id")
    return value


def derived_session_id(api: ApiKind, body: Any, key_id: str) -> str:
    """``p-<hex>``: a digest of the conversation's opening (system text and first user message, as sent)
    and the app key, so every call of one conversation finds the same session without a header."""
    system: list[Any] = []
    first: Any = None
    if isinstance(body, dict):
        if api == ApiKind.COMPLETIONS:
            first = body.get("prompt")  # a completions prompt has no turns: the whole prompt
        elif api == ApiKind.ANTHROPIC_MESSAGES:
            system.append(body.get("system"))
            first = _first_user(body.get("messages"), system)
        elif api == ApiKind.RESPONSES:
            system.append(body.get("instructions"))
            items = body.get("input")
            first = items if isinstance(items, str) else _first_user(items, system)
        elif api == ApiKind.GEMINI:  # contents of {role, parts}; the REST API takes snake_case names too
            system.append(body.get("systemInstruction", body.get("system_instruction")))
            contents = body.get("contents")
            first = next((c.get("parts") for c in contents if isinstance(c, dict) and c.get("role", "user") == "user"),
                         None) if isinstance(contents, list) else None
        else:
            first = _first_user(body.get("messages"), system)
    text = orjson.dumps([system, first, key_id], option=orjson.OPT_SORT_KEYS)
    return "p-" + hashlib.sha256(text).hexdigest()[:32]


def _first_user(messages: Any, system: list[Any]) -> Any:
    """The first user message's content; system and developer messages before it go into ``system``."""
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(m.get("content"))
        elif role == "user" or (role is None and m.get("type") in (None, "message")):
            return m.get("content")
    return None


def sampled(deployment: str, session_id: str, fraction: float) -> bool:
    """Whether a session is recorded: decided by its id alone, so every gateway decides the same."""
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(f"{deployment}\0{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass(eq=False)
class LiveSession:
    """A session as the gateway serves it: its rollout state (recorded or not) and its window."""

    deployment: str
    id: str
    state: RolloutState
    derived: bool
    last_call_at: float
    closes_at: float
    arm: str
    version: int  # the version its arm was assigned (``sessions.policy_version``)
    epoch: int  # the arm plan's epoch when what serves it was last asked
    pending: int = 0  # calls answered since the last flush
    serving: int = 0  # calls being served now: its window does not close under them (``busy``)


def _serve(state: RolloutState, a: Assignment) -> None:
    """Calls of the session go to its arm's engine model, stamped with its version (None: the gateway's)."""
    state.engine_model = a.engine_model
    state.version = a.version if a.engine_model is not None else None


class SessionTable:
    """The live sessions of this gateway (``get``, ``touch``) and their batched writes (``flush``)."""

    def __init__(self, store: Store, registry: RolloutRegistry, arms: ArmPlan, config: ProductionConfig,
                 forget: Callable[[str], None] | None = None) -> None:
        self._store, self._registry, self.arms, self._config = store, registry, arms, config
        self._forget = forget  # drops an evicted session's per-call memory elsewhere (engine affinity)
        self._live: dict[tuple[str, str], LiveSession] = {}
        self._opening: dict[tuple[str, str], asyncio.Future[LiveSession | None]] = {}
        self._generation: dict[tuple[str, str], int] = {}  # (deployment, derived id) -> current generation
        self._dirty: dict[tuple[str, str], LiveSession] = {}
        self._last_sweep = time.monotonic()
        self._flushing = asyncio.Lock()
        self.opened = 0  # sessions opened by this gateway (metrics)
        self.recorded = 0

    @property
    def window_s(self) -> float:
        return self._config.feedback.window_s

    # -- finding a session ----------------------------------------------------------------------------
    async def get(self, deployment: str, session_id: str, key_id: str, *, derived: bool,
                  record_fraction: float) -> LiveSession:
        """The live session of a call, opened on its first call; a derived one that is over moves on to
        its next generation, a named one that is over is refused (409)."""
        if not derived:
            live = await self._get(deployment, session_id, key_id, False, record_fraction)
            if live is None:
                raise SessionClosed(f"session {session_id!r} is over: its feedback window closed; send the next "
                                    "conversation under a new session id")
            return live
        gen = self._generation.get((deployment, session_id), 0)
        while True:
            sid = session_id if gen == 0 else f"{session_id}.{gen}"
            live = await self._get(deployment, sid, key_id, True, record_fraction)
            if live is not None:
                if gen:
                    if len(self._generation) >= MAX_CACHED:
                        self._generation.pop(next(iter(self._generation)))
                    self._generation[(deployment, session_id)] = gen
                return live
            gen += 1

    async def _get(self, deployment: str, session_id: str, key_id: str, derived: bool,
                   fraction: float) -> LiveSession | None:
        k = (deployment, session_id)
        live = self._live.get(k)
        if live is not None:
            if not self._over(live.state.closed, live.last_call_at, live.closes_at, derived):
                if live.epoch != self.arms.epoch(deployment):  # a canary started, was promoted or rolled back
                    live.epoch = self.arms.epoch(deployment)
                    _serve(live.state, await asyncio.to_thread(self.arms.resumed, deployment, live.arm, live.version))
                return live
            self._evict(k)
        fut = self._opening.get(k)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._opening[k] = fut
        try:
            live = await self._open(deployment, session_id, key_id, derived, fraction)
            fut.set_result(live)
            return live
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved, whether or not another call waits on it
            raise
        finally:
            self._opening.pop(k, None)

    async def _open(self, deployment: str, session_id: str, key_id: str, derived: bool,
                    fraction: float) -> LiveSession | None:
        epoch = self.arms.epoch(deployment)
        session, assignment, created = await asyncio.to_thread(self._open_sync, deployment, session_id, key_id,
                                                               fraction)
        if not created and (session.outcome_status != OPEN or self._over(False, session.last_call_at,
                                                                         session.feedback_closes_at, derived)):
            return None  # (a session just opened is never over: a derived id's next generation is found)
        if session.rollout_id is None:
            state = RolloutState(id=f"unrecorded:{deployment}:{session_id}", key_hash=NO_ROLLOUT_KEY, record=False)
        elif created:
            state = RolloutState(id=session.rollout_id, key_hash=NO_ROLLOUT_KEY)
            self._registry.add(state)
        else:
            state = await self._registry.load(session.rollout_id)
            if state.closed:
                return None
        _serve(state, assignment)
        if created:
            self.opened += 1
            self.recorded += session.recorded
        live = LiveSession(deployment, session_id, state, derived, session.last_call_at, session.feedback_closes_at,
                           session.arm, session.policy_version, epoch)
        if len(self._live) >= MAX_CACHED:
            self._evict(next(iter(self._live)))
        self._live[(deployment, session_id)] = live
        return live

    def _open_sync(self, deployment: str, session_id: str, key_id: str,
                   fraction: float) -> tuple[Session, Assignment, bool]:
        try:
            s = self._store.get_session(deployment, session_id)
            return s, self.arms.resumed(deployment, s.arm, s.policy_version), False
        except NotFound:
            pass
        a = self.arms.assign(deployment, session_id)
        s, created = self._store.open_session(
            deployment, session_id, key_id=key_id, arm=a.arm, policy_version=a.version,
            recorded=sampled(deployment, session_id, fraction), window_s=self.window_s,
            rollout_key_hash=NO_ROLLOUT_KEY)
        if not created:  # another gateway opened it in between: serve it as that one assigned it
            a = self.arms.resumed(deployment, s.arm, s.policy_version)
        return s, a, created

    def _over(self, closed: bool, last_call_at: float, closes_at: float, derived: bool) -> bool:
        now = time.time()
        return closed or now >= closes_at or (derived and now - last_call_at > self._config.session_idle_s)

    # -- counting calls -------------------------------------------------------------------------------
    def busy(self, deployment: str, session_id: str) -> bool:
        """Whether a call of the session is being served (``windows.py`` leaves its window open)."""
        live = self._live.get((deployment, session_id))
        return live is not None and live.serving > 0

    def touch(self, live: LiveSession) -> None:
        """A call of ``live`` was answered: its window now ends ``window_s`` from now (written by ``flush``)."""
        now = time.time()
        live.pending += 1
        live.last_call_at = max(live.last_call_at, now)
        live.closes_at = live.last_call_at + self.window_s
        self._dirty[(live.deployment, live.id)] = live

    async def flush(self) -> None:
        """Write the calls counted since the last flush (one transaction); drop idle sessions from memory.
        Flushes run one at a time, so a flush that returns has written every call counted before it."""
        async with self._flushing:
            await self._flush()

    async def _flush(self) -> None:
        dirty, self._dirty = self._dirty, {}
        touches = [SessionTouch(s.deployment, s.id, s.pending, s.last_call_at) for s in dirty.values() if s.pending]
        for s in dirty.values():
            s.pending = 0
        if touches:
            try:
                await asyncio.to_thread(self._store.touch_sessions, touches, self.window_s)
            except Exception:  # noqa: BLE001 - the store is down: keep the counts for the next flush
                log.warning("could not write %d sessions' call counts; retrying", len(touches), exc_info=True)
                for t in touches:
                    live = dirty[(t.deployment, t.session_id)]
                    live.pending += t.calls
                    self._dirty.setdefault((t.deployment, t.session_id), live)
        if time.monotonic() - self._last_sweep > min(60.0, self._config.session_idle_s / 4):
            self.sweep()

    def sweep(self) -> int:
        """Drop sessions idle longer than ``session_idle_s`` (or over) from memory; how many."""
        self._last_sweep = time.monotonic()
        idle = [k for k, s in self._live.items()
                if not s.serving and self._over(s.state.closed, s.last_call_at, s.closes_at, True)]
        for k in idle:
            self._evict(k)
        return len(idle)

    def _evict(self, k: tuple[str, str]) -> None:
        live = self._live.pop(k, None)
        if live is None:
            return
        if live.state.record:
            self._registry.drop(live.state.id)
        elif self._registry.on_close is not None:
            self._registry.on_close(live.state.id)  # the renderer's token history of the session
        if self._forget is not None:
            self._forget(live.state.id)
