"""Production mode's serving records: deployments (each with its run), app keys, sessions.

A deployment is an application the gateway serves under ``/p/{deployment}/v1``; it owns a ``runs`` row
(name ``production:<deployment>``) so its recorded sessions are ordinary rollouts of that run. App keys are
stored as SHA-256 hashes only: the key itself is shown once, by the admin API that creates it. A session
is opened on its first call in one transaction -- with its rollout (``running``) when it is recorded --
so two gateways opening the same session agree on one row. Later calls only ``touch`` it (call count,
last call, and so the end of its feedback window), in batches. Windows and outcomes: ``feedback.py``.
A feature store of production mode: the core record does not import it; ``assembly.py`` mixes it in.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from harnessrl.store.base import AlreadyExists
from harnessrl.store.feedback import OPEN
from harnessrl.store.mixin import SqlMixin
from harnessrl.store.schema import StoreFeature
from harnessrl.types import RolloutStatus

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike

#: Production mode (``harnessrl/production/``, docs/production.md). A deployment is an application served
#: by the gateway; its recorded sessions are rollouts of the deployment's own run (``run_id``), so export,
#: inspection and training read them as they read any rollout. Keys are stored as SHA-256 hashes only.
_DEPLOYMENTS = """CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    config TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)"""
_APP_KEYS = """CREATE TABLE IF NOT EXISTS app_keys (
    id TEXT PRIMARY KEY,
    deployment TEXT NOT NULL REFERENCES deployments (name),
    key_hash TEXT NOT NULL UNIQUE,
    label TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
)"""
#: One conversation of a deployed application. ``id`` is the application's session id (header or path) or
#: a conversation-prefix digest; ``rollout_id`` is set only when the session is recorded (sampled
#: recording); ``arm`` (``stable`` | ``canary``) and ``policy_version`` say what served it. When its feedback
#: window closes, ``outcome`` holds the combined feedback and ``outcome_status`` how it was decided
#: (``open`` -> ``scored`` | ``defaulted`` | ``dropped``); ``trained_version`` is the version whose update used it.
_SESSIONS = """CREATE TABLE IF NOT EXISTS sessions (
    deployment TEXT NOT NULL REFERENCES deployments (name),
    id TEXT NOT NULL,
    rollout_id TEXT REFERENCES rollouts (id),
    key_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    recorded INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    last_call_at DOUBLE PRECISION NOT NULL,
    feedback_closes_at DOUBLE PRECISION NOT NULL,
    outcome DOUBLE PRECISION,
    outcome_status TEXT NOT NULL,
    trained_version INTEGER,
    PRIMARY KEY (deployment, id)
)"""
_SESSIONS_BY_WINDOW = ("CREATE INDEX IF NOT EXISTS sessions_by_window ON sessions"
                       " (deployment, outcome_status, feedback_closes_at)")

#: The name of a deployment's run.
RUN_PREFIX = "production:"


@dataclass(frozen=True, slots=True)
class Deployment:
    """An application served in production mode; ``run_id`` holds its recorded sessions as rollouts."""

    name: str
    run_id: str
    config: dict[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class AppKey:
    """An application's API key, without the key: id, label, times (``revoked_at`` None: valid)."""

    id: str
    deployment: str
    label: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class SessionTouch:
    """Calls served to a session since the last touch, and when the newest one arrived."""

    deployment: str
    session_id: str
    calls: int
    last_call_at: float


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation of a deployed application (``schema.py`` documents the columns).

    ``rollout_id`` is set when the session is recorded; ``arm`` and ``policy_version`` say what served it;
    ``outcome_status`` is ``open`` until its feedback window closes."""

    deployment: str
    id: str
    rollout_id: str | None
    key_id: str
    arm: str
    policy_version: int
    recorded: bool
    calls: int
    created_at: float
    last_call_at: float
    feedback_closes_at: float
    outcome: float | None
    outcome_status: str
    trained_version: int | None


def _deployment(r: RowLike) -> Deployment:
    return Deployment(r["name"], r["run_id"], orjson.loads(r["config"]), r["created_at"])


def _key(r: RowLike) -> AppKey:
    return AppKey(r["id"], r["deployment"], r["label"], r["created_at"], r["revoked_at"])


def _session(r: RowLike) -> Session:
    return Session(r["deployment"], r["id"], r["rollout_id"], r["key_id"], r["arm"], r["policy_version"],
                   bool(r["recorded"]), r["calls"], r["created_at"], r["last_call_at"], r["feedback_closes_at"],
                   r["outcome"], r["outcome_status"], r["trained_version"])  # fmt: skip


_KEY_COLUMNS = "id, deployment, label, created_at, revoked_at"  # never key_hash


class DeploymentsMixin(SqlMixin):
    """The deployment, app-key and session methods of ``SqlStore`` drivers (mixed in before it)."""

    FEATURE = StoreFeature("production deployments", 4, (_DEPLOYMENTS, _APP_KEYS, _SESSIONS, _SESSIONS_BY_WINDOW))

    # -- deployments ----------------------------------------------------------------------------------
    def create_deployment(self, name: str, config: dict[str, Any]) -> Deployment:
        """Create a deployment and its run (``production:<name>``) in one transaction."""
        p = self.P
        now = time.time()
        run_id = uuid.uuid4().hex
        text = orjson.dumps(config).decode()
        with self._write() as conn:
            conn.execute(f"INSERT INTO runs (id, name, config, created_at) VALUES ({p}, {p}, {p}, {p})",
                         (run_id, RUN_PREFIX + name, text, now))
            cur = conn.execute(f"INSERT INTO deployments (name, run_id, config, created_at) VALUES ({p}, {p}, {p}, "
                               f"{p}) ON CONFLICT (name) DO NOTHING", (name, run_id, text, now))
            if cur.rowcount == 0:  # rolls the run back too
                raise AlreadyExists(f"deployment {name!r} already exists")
        return Deployment(name, run_id, config, now)

    def get_deployment(self, name: str) -> Deployment:
        with self._read() as conn:
            sql = f"SELECT * FROM deployments WHERE name = {self.P}"
            return _deployment(self._one(conn, sql, (name,), f"deployment {name!r}"))

    def list_deployments(self) -> list[Deployment]:
        with self._read() as conn:
            return [_deployment(r) for r in conn.execute("SELECT * FROM deployments ORDER BY name").fetchall()]

    # -- app keys -------------------------------------------------------------------------------------
    def add_app_key(self, deployment: str, key_hash: str, label: str) -> AppKey:
        """Store a new key of ``deployment`` by its hash (the caller shows the key once, never stores it)."""
        p = self.P
        key = AppKey("key_" + uuid.uuid4().hex[:16], deployment, label, time.time(), None)
        with self._write() as conn:
            self._one(conn, f"SELECT 1 FROM deployments WHERE name = {p}", (deployment,), f"deployment {deployment!r}")
            conn.execute(f"INSERT INTO app_keys (id, deployment, key_hash, label, created_at) VALUES ({p}, {p}, {p}, "
                         f"{p}, {p})", (key.id, deployment, key_hash, label, key.created_at))
        return key

    def find_app_key(self, key_hash: str) -> AppKey | None:
        """The key with this hash (revoked or not), or None."""
        with self._read() as conn:
            row = conn.execute(f"SELECT {_KEY_COLUMNS} FROM app_keys WHERE key_hash = {self.P}",
                               (key_hash,)).fetchone()
        return None if row is None else _key(row)

    def list_app_keys(self, deployment: str) -> list[AppKey]:
        with self._read() as conn:
            sql = f"SELECT {_KEY_COLUMNS} FROM app_keys WHERE deployment = {self.P} ORDER BY created_at, id"
            return [_key(r) for r in conn.execute(sql, (deployment,)).fetchall()]

    def revoke_app_key(self, deployment: str, key_id: str) -> AppKey:
        """Revoke a key of ``deployment`` (revoking twice keeps the first time); NotFound otherwise."""
        p = self.P
        with self._write() as conn:
            conn.execute(f"UPDATE app_keys SET revoked_at = COALESCE(revoked_at, {p}) WHERE deployment = {p} "
                         f"AND id = {p}", (time.time(), deployment, key_id))
            sql = f"SELECT {_KEY_COLUMNS} FROM app_keys WHERE deployment = {p} AND id = {p}"
            return _key(self._one(conn, sql, (deployment, key_id), f"key {key_id!r} of deployment {deployment!r}"))

    # -- sessions -------------------------------------------------------------------------------------
    def open_session(self, deployment: str, session_id: str, *, key_id: str, arm: str, policy_version: int,
                     recorded: bool, window_s: float, rollout_key_hash: str) -> tuple[Session, bool]:
        """The session, created on its first call (True) or as another call created it before (False).

        A recorded session gets its rollout in the same transaction: run = the deployment's, ``task_id`` =
        the session id, ``group_id`` = the deployment, status ``running``; ``rollout_key_hash`` is what the
        rollout route would compare keys with (pass one no key hashes to: app keys never open ``/r/``)."""
        p = self.P
        now = time.time()
        with self._write() as conn:
            dep = self._one(conn, f"SELECT run_id FROM deployments WHERE name = {p}", (deployment,),
                            f"deployment {deployment!r}")
            cur = conn.execute(
                "INSERT INTO sessions (deployment, id, key_id, arm, policy_version, recorded, calls, created_at, "
                f"last_call_at, feedback_closes_at, outcome_status) VALUES ({', '.join([p] * 11)}) "
                "ON CONFLICT (deployment, id) DO NOTHING",
                (deployment, session_id, key_id, arm, policy_version, int(recorded), 0, now, now, now + window_s,
                 OPEN))  # fmt: skip
            created = cur.rowcount > 0
            if created and recorded:
                rid = uuid.uuid4().hex
                meta = {"production": {"deployment": deployment, "session_id": session_id, "arm": arm}}
                conn.execute(
                    "INSERT INTO rollouts (id, run_id, task_id, group_id, input, api_key_hash, status, "
                    f"policy_version, created_at, started_at, metadata) VALUES ({', '.join([p] * 11)})",
                    (rid, dep["run_id"], session_id, deployment,
                     orjson.dumps({"deployment": deployment, "session_id": session_id}).decode(), rollout_key_hash,
                     str(RolloutStatus.RUNNING), policy_version, self._next_created(), now,
                     orjson.dumps(meta).decode()))  # fmt: skip
                conn.execute(f"UPDATE sessions SET rollout_id = {p} WHERE deployment = {p} AND id = {p}",
                             (rid, deployment, session_id))
            row = self._one(conn, f"SELECT * FROM sessions WHERE deployment = {p} AND id = {p}",
                            (deployment, session_id), f"session {session_id!r}")
        return _session(row), created

    def get_session(self, deployment: str, session_id: str) -> Session:
        with self._read() as conn:
            sql = f"SELECT * FROM sessions WHERE deployment = {self.P} AND id = {self.P}"
            return _session(self._one(conn, sql, (deployment, session_id),
                                      f"session {session_id!r} of deployment {deployment!r}"))

    def touch_sessions(self, touches: Sequence[SessionTouch], window_s: float) -> int:
        """Count calls served to open sessions and move their feedback windows to ``last_call_at +
        window_s`` (never back), in one transaction; returns how many sessions were still open."""
        p = self.P
        n = 0
        with self._write() as conn:
            for t in sorted(touches, key=lambda t: (t.deployment, t.session_id)):  # one lock order
                closes = t.last_call_at + window_s
                cur = conn.execute(
                    f"UPDATE sessions SET calls = calls + {p}, "
                    f"last_call_at = CASE WHEN last_call_at < {p} THEN {p} ELSE last_call_at END, "
                    f"feedback_closes_at = CASE WHEN feedback_closes_at < {p} THEN {p} ELSE feedback_closes_at END "
                    f"WHERE deployment = {p} AND id = {p} AND outcome_status = {p}",
                    (t.calls, t.last_call_at, t.last_call_at, closes, closes, t.deployment, t.session_id, OPEN))
                n += max(cur.rowcount, 0)
        return n

    def list_sessions(self, deployment: str, *, recorded: bool | None = None, limit: int = 100,
                      offset: int = 0) -> list[Session]:
        """A deployment's sessions, oldest first, paged."""
        p = self.P
        sql, args = f"SELECT * FROM sessions WHERE deployment = {p}", [deployment]
        if recorded is not None:
            sql, args = f"{sql} AND recorded = {p}", [*args, int(recorded)]
        with self._read() as conn:
            rows = conn.execute(f"{sql} ORDER BY created_at, id LIMIT {p} OFFSET {p}", [*args, limit, offset])
            return [_session(r) for r in rows.fetchall()]
