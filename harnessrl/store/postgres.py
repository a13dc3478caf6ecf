"""The store at scale: PostgreSQL, shared by any number of gateway, controller and trainer processes.

Same schema (``schema.py``), same row codec (``rows.py``) and same rules (``rules.py``) as SQLite; what
differs is how writes stay correct when several *processes* write one database at once:

- Every write is one transaction on a pooled connection (psycopg 3, ``psycopg_pool``) at READ
  COMMITTED. Per-rollout numbering (call and reward indices) happens under a row lock on the rollout
  (``SELECT ... FOR NO KEY UPDATE``, which still lets other transactions insert rows referencing it),
  so two gateways recording calls of the same rollout are serialized there and never pick one index
  twice. A batch locks its rollouts in id order: two batches can never deadlock on each other.
- The next index is read by a *separate* statement after the lock is held: at READ COMMITTED each
  statement takes a fresh snapshot, so it sees what the previous lock holder committed (a subquery in
  the locking statement would not). The in-memory ``SeqCache`` is used only when its ``next_index``
  matches that database value; otherwise the rollout's sequences are rebuilt from the rows, because
  another process wrote calls in between.
- A commit returns after PostgreSQL has made it durable (``synchronous_commit`` as the server says).
- Migrations run under an advisory lock, so gateways starting together do not race to create tables.

URL: ``postgresql://user:password@host:port/db?<libpq parameters>`` plus harnessrl's own options,
removed before the URL reaches libpq: ``pool_size=N`` (connections per process, default 8) and
``schema=NAME`` (keep the tables in that schema, created if missing: several stores in one database;
the tests give every test an empty one this way).

PostgreSQL text cannot hold NUL characters: in the free-form ``error`` and ``logs`` of a rollout (text
that comes from subprocesses) a NUL is stored as U+FFFD.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from harnessrl.store.base import (
    AlreadyExists,
    NewCall,
    NotFound,
    RolloutClosed,
    RolloutStats,
    Store,
    StoreError,
)
from harnessrl.store.rows import (
    CALL_COLUMNS,
    SEQ_COLUMNS,
    RolloutSeqs,
    SeqCache,
    decode_call,
    encode_call,
    replay,
)
from harnessrl.store.rules import (
    ROLLOUT_COLUMNS,
    check_reward_value,
    check_transition,
    check_transition_args,
    list_rollouts_sql,
    rollout_from_row,
)
from harnessrl.store.schema import MIGRATIONS, SCHEMA_VERSION, ddl
from harnessrl.types import (
    Call,
    FailureKind,
    PolicyVersion,
    Reward,
    Rollout,
    RolloutStatus,
    Run,
    Task,
    TaskSplit,
)

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg.sql import SQL, Identifier
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the PostgreSQL store needs psycopg 3: pip install 'harnessrl[postgres]' "
        "(psycopg[binary] and psycopg_pool)"
    ) from exc

log = logging.getLogger(__name__)

_CALLS = ", ".join(CALL_COLUMNS)
_INSERT_CALL = f"INSERT INTO calls ({_CALLS}) VALUES ({', '.join(['%s'] * len(CALL_COLUMNS))})"
_SEQ_COLUMNS = ", ".join(SEQ_COLUMNS)
#: Key of the advisory lock that serializes migrations (any constant unique to harnessrl).
_MIGRATION_LOCK = 0x6872_6C73_746F_7265  # "hrlstore"
_OPTIONS = {"pool_size", "schema"}


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def _text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", "\ufffd")


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """``(libpq URL, harnessrl options)``: our options are taken out of the query string."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {redact_url(url)!r}; use postgresql://user@host/db")
    query, options = [], {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _OPTIONS:
            options[key] = value
        else:
            query.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(query))), options


def redact_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(Store):
    """``Store`` on a PostgreSQL database; safe to share between threads and between processes."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int | None = None,
        cache_bytes: int = 64 << 20,
        connect_timeout_s: float = 10.0,
    ) -> None:
        conninfo, options = parse_url(url)
        self.url = redact_url(url)
        size = pool_size or int(options.get("pool_size", 8))
        if size < 1:
            raise ValueError(f"pool_size must be >= 1, got {size}")
        self._cache = SeqCache(cache_bytes)
        self._cache_lock = threading.Lock()
        self._created_lock = threading.Lock()
        self._last_created = 0.0
        self.schema = options.get("schema") or None
        # A first plain connection gives a clear error (refused, auth, no such database) and migrates.
        try:
            with psycopg.connect(
                conninfo, autocommit=True, connect_timeout=max(1, int(connect_timeout_s))
            ) as conn:
                self._migrate(conn)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to PostgreSQL at {self.url}: {exc}".strip()) from None
        self._pool: ConnectionPool[Any] | None = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            check=ConnectionPool.check_connection,
            configure=self._use_schema if self.schema else None,
            open=False,
            name="harnessrl-store",
        )
        self._pool.open(wait=True, timeout=connect_timeout_s)

    # -- connections ----------------------------------------------------------------------------------
    def _use_schema(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(SQL("SET search_path TO {}").format(Identifier(self.schema or "public")))

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if self.schema:
                conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.schema)))
                self._use_schema(conn)
            # Skipping the DDL when up to date avoids CREATE INDEX's table locks on a busy database.
            exists = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
            row = (
                conn.execute("SELECT version FROM schema_version").fetchone()
                if exists and exists[0]
                else None
            )
            if row is not None and row[0] == SCHEMA_VERSION:
                return
            for stmt in ddl("postgresql"):
                conn.execute(stmt)
            version = SCHEMA_VERSION if row is None else row[0]
            if row is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.url} has schema version {version}, newer than this harnessrl's "
                    f"{SCHEMA_VERSION}: upgrade harnessrl"
                )
            for v in range(version, SCHEMA_VERSION):
                log.info("migrating %s from schema version %d to %d", self.url, v, v + 1)
                for stmt in MIGRATIONS[v]:
                    conn.execute(stmt)
            conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))

    def _pool_or_raise(self) -> ConnectionPool[Any]:
        if self._pool is None:
            raise StoreError("the store is closed")
        return self._pool

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction, committed on success, else rolled back."""
        with self._pool_or_raise().connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection[Any]]:
        """An autocommit connection: each statement reads one committed snapshot."""
        with self._pool_or_raise().connection() as conn:
            yield conn

    def _one(self, conn: psycopg.Connection[Any], sql: str, args: Sequence[Any], what: str) -> Any:
        row = conn.execute(sql, args).fetchone()
        if row is None:
            raise NotFound(f"{what} does not exist")
        return row

    def _lock_rollout(self, conn: psycopg.Connection[Any], rollout_id: str) -> RolloutStatus:
        """Lock the rollout row for this transaction; its status, read under the lock."""
        sql = "SELECT status FROM rollouts WHERE id = %s FOR NO KEY UPDATE"
        return RolloutStatus(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")["status"])

    # -- runs and tasks -------------------------------------------------------------------------------
    def create_run(self, name: str, config: dict[str, Any], run_id: str | None = None) -> Run:
        run = Run(id=run_id or uuid.uuid4().hex, name=name, config=config, created_at=time.time())
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO runs (id, name, config, created_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (run.id, name, _dumps(config), run.created_at),
            )
            if cur.rowcount == 0:
                raise AlreadyExists(f"run {run.id!r} already exists; pass another run_id or reuse it")
        return run

    def get_run(self, run_id: str) -> Run:
        with self._read() as conn:
            row = self._one(conn, "SELECT * FROM runs WHERE id = %s", (run_id,), f"run {run_id!r}")
        return Run(row["id"], row["name"], orjson.loads(row["config"]), row["created_at"])

    def list_runs(self) -> list[Run]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created_at, id").fetchall()
        return [Run(r["id"], r["name"], orjson.loads(r["config"]), r["created_at"]) for r in rows]

    def upsert_tasks(self, run_id: str, tasks: Sequence[Task]) -> None:
        """Insert or update tasks by ``(run_id, task.id)``; new tasks keep their order of first insert."""
        for task in tasks:
            if task.run_id != run_id:
                raise ValueError(f"task {task.id!r} belongs to run {task.run_id!r}, not {run_id!r}")
        with self._write() as conn:
            # The run's row lock serializes position numbering between processes.
            sql = "SELECT 1 FROM runs WHERE id = %s FOR NO KEY UPDATE"
            self._one(conn, sql, (run_id,), f"run {run_id!r}")
            sql = "SELECT COALESCE(MAX(position) + 1, 0) AS start FROM tasks WHERE run_id = %s"
            start = self._one(conn, sql, (run_id,), "the next task position")["start"]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO tasks (run_id, id, input, split, position) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (run_id, id) DO UPDATE SET input = excluded.input, split = excluded.split",
                    [(run_id, t.id, _dumps(t.input), str(t.split), start + i) for i, t in enumerate(tasks)],
                )

    def list_tasks(self, run_id: str, split: TaskSplit | None = None) -> list[Task]:
        with self._read() as conn:
            self._one(conn, "SELECT 1 FROM runs WHERE id = %s", (run_id,), f"run {run_id!r}")
            sql, args = "SELECT * FROM tasks WHERE run_id = %s", [run_id]
            if split is not None:
                sql, args = sql + " AND split = %s", [*args, str(split)]
            rows = conn.execute(sql + " ORDER BY position", args).fetchall()
        return [Task(r["run_id"], r["id"], orjson.loads(r["input"]), TaskSplit(r["split"])) for r in rows]

    # -- rollouts -------------------------------------------------------------------------------------
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
        rid = rollout_id or uuid.uuid4().hex
        with self._created_lock:  # strictly increasing creation times keep paging order = creation order
            created = self._last_created = max(time.time(), self._last_created + 1e-6)
        with self._write() as conn:
            if run_id is not None:
                self._one(conn, "SELECT 1 FROM runs WHERE id = %s", (run_id,), f"run {run_id!r}")
            row = conn.execute(
                "INSERT INTO rollouts (id, run_id, task_id, group_id, input, api_key_hash, status, "
                "policy_version, step, created_at, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                f"ON CONFLICT (id) DO NOTHING RETURNING {ROLLOUT_COLUMNS}",
                (rid, run_id, task_id, group_id, _dumps(input), api_key_hash, str(RolloutStatus.QUEUED),
                 policy_version, step, created, _dumps(metadata or {})),
            ).fetchone()  # fmt: skip
            if row is None:
                raise AlreadyExists(f"rollout {rid!r} already exists")
        return rollout_from_row(row)

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._read() as conn:
            sql = f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE id = %s"
            return rollout_from_row(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}"))

    def rollout_key_hash(self, rollout_id: str) -> str:
        with self._read() as conn:
            sql = "SELECT api_key_hash FROM rollouts WHERE id = %s"
            return str(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")["api_key_hash"])

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
        status = check_transition_args(status, failure_kind)
        now = time.time()
        with self._write() as conn:
            check_transition(rollout_id, self._lock_rollout(conn, rollout_id), status)
            row = self._one(
                conn,
                "UPDATE rollouts SET status = %s, failure_kind = COALESCE(%s, failure_kind), "
                "error = COALESCE(%s, error), exit_code = COALESCE(%s, exit_code), logs = COALESCE(%s, logs), "
                "runner_handle = COALESCE(%s, runner_handle), started_at = COALESCE(%s, started_at), "
                f"finished_at = COALESCE(%s, finished_at) WHERE id = %s RETURNING {ROLLOUT_COLUMNS}",
                (str(status), None if failure_kind is None else str(FailureKind(failure_kind)), _text(error),
                 exit_code, _text(logs), runner_handle, now if status is RolloutStatus.RUNNING else None,
                 now if status.terminal else None, rollout_id),
                f"rollout {rollout_id!r}",
            )  # fmt: skip
        if status.terminal:
            with self._cache_lock:
                self._cache.discard(rollout_id)
        return rollout_from_row(row)

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
        """Rollouts oldest first; every filter combination is served by an index of ``schema.py``."""
        sql, args = list_rollouts_sql("%s", run_id=run_id, status=status, step=step, limit=limit,
                                      offset=offset, task_id=task_id, failure_kind=failure_kind)
        with self._read() as conn:
            return [rollout_from_row(r) for r in conn.execute(sql, args).fetchall()]

    # -- calls ----------------------------------------------------------------------------------------
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        if not calls:
            return []
        now = time.time()
        indices: list[int] = []
        # Pipelined: BEGIN, lock and last-index queries travel together, then the inserts and COMMIT,
        # so a batch costs two round trips to the server instead of six.
        with self._pool_or_raise().connection() as conn, conn.pipeline(), conn.transaction():
            staged = self._seqs_for_write(conn, sorted({c.rollout_id for c in calls}))
            rows = []
            for call in calls:
                seqs = staged[call.rollout_id]
                indices.append(seqs.next_index)
                rows.append(encode_call(call, seqs, now))
            with conn.cursor() as cur:
                cur.executemany(_INSERT_CALL, rows)
        with self._cache_lock:
            for rollout_id, seqs in staged.items():
                self._cache.put(rollout_id, seqs)
        return indices

    def _seqs_for_write(
        self, conn: psycopg.Connection[Any], rollout_ids: list[str]
    ) -> dict[str, RolloutSeqs]:
        """Lock the rollouts (in id order) and stage private copies of their sequences, checked against
        the database's last call index: another process may have written since the cache was filled."""
        locking = conn.execute(
            "SELECT id, status FROM rollouts WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE", (rollout_ids,)
        )
        # A separate statement, so a new snapshot taken once the locks are held: it sees the calls of
        # whoever held them before us (in the locking statement itself a subquery would not).
        last_indices = conn.execute(
            "SELECT r.id, (SELECT MAX(call_index) FROM calls c WHERE c.rollout_id = r.id) AS last"
            " FROM rollouts r WHERE r.id = ANY(%s)",
            (rollout_ids,),
        )
        statuses = {row["id"]: row["status"] for row in locking.fetchall()}
        for rollout_id in rollout_ids:
            if rollout_id not in statuses:
                raise NotFound(f"rollout {rollout_id!r} does not exist")
            if RolloutStatus(statuses[rollout_id]).terminal:
                raise RolloutClosed(
                    f"rollout {rollout_id!r} is {statuses[rollout_id]}; no more calls can be recorded"
                )
        last = {row["id"]: row["last"] for row in last_indices.fetchall()}
        staged = {}
        for rollout_id in rollout_ids:
            next_index = 0 if last[rollout_id] is None else last[rollout_id] + 1
            with self._cache_lock:
                cached = self._cache.get(rollout_id)
                if cached is not None and cached.next_index == next_index:
                    staged[rollout_id] = cached.copy()
                    continue
            seqs = staged[rollout_id] = RolloutSeqs()
            rows = conn.execute(
                f"SELECT {_SEQ_COLUMNS} FROM calls WHERE rollout_id = %s ORDER BY call_index",
                (rollout_id,),
                binary=True,
            )
            for call_row, _, leaf in replay(rows):
                seqs.add(leaf, call_row["parent_index"], call_row["prefix_len"])
        return staged

    def get_calls(self, rollout_id: str) -> list[Call]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_CALLS} FROM calls WHERE rollout_id = %s ORDER BY call_index",
                (rollout_id,),
                binary=True,
            ).fetchall()
            if not rows:
                sql = "SELECT 1 FROM rollouts WHERE id = %s"
                self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")
        return [decode_call(row, prompt, leaf.request) for row, prompt, leaf in replay(rows)]

    def get_call(self, rollout_id: str, index: int) -> Call:
        # Only the call's ancestors (the parents its prompt prefix comes from) are read.
        with self._read() as conn:
            rows = conn.execute(
                "WITH RECURSIVE chain (call_index, parent_index) AS ("
                " SELECT call_index, parent_index FROM calls WHERE rollout_id = %s AND call_index = %s"
                " UNION ALL SELECT c.call_index, c.parent_index FROM calls c JOIN chain"
                " ON c.rollout_id = %s AND c.call_index = chain.parent_index)"
                f" SELECT {_CALLS} FROM calls WHERE rollout_id = %s"
                " AND call_index IN (SELECT call_index FROM chain) ORDER BY call_index",
                (rollout_id, index, rollout_id, rollout_id),
                binary=True,
            ).fetchall()
        if not rows:
            raise NotFound(f"call {index} of rollout {rollout_id!r} does not exist")
        *_, (row, prompt, leaf) = replay(rows)
        return decode_call(row, prompt, leaf.request)

    # -- rewards --------------------------------------------------------------------------------------
    def add_reward(
        self, rollout_id: str, value: float, name: str = "reward", call_index: int | None = None
    ) -> Reward:
        value = check_reward_value(name, value)
        reward = Reward(rollout_id, value, name, call_index, time.time())
        with self._write() as conn:
            if self._lock_rollout(conn, rollout_id) == RolloutStatus.CANCELLED:
                raise RolloutClosed(f"rollout {rollout_id!r} was cancelled; it takes no rewards")
            if call_index is not None:
                sql = "SELECT 1 FROM calls WHERE rollout_id = %s AND call_index = %s"
                self._one(conn, sql, (rollout_id, call_index), f"call {call_index} of rollout {rollout_id!r}")
            sql = "SELECT COALESCE(MAX(reward_index) + 1, 0) AS next FROM rewards WHERE rollout_id = %s"
            index = self._one(conn, sql, (rollout_id,), "the next reward index")["next"]
            conn.execute(
                "INSERT INTO rewards (rollout_id, reward_index, name, value, call_index, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (rollout_id, index, name, value, call_index, reward.created_at),
            )
        return reward

    def get_rewards(self, rollout_id: str) -> list[Reward]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM rewards WHERE rollout_id = %s ORDER BY reward_index", (rollout_id,)
            ).fetchall()
            if not rows:
                sql = "SELECT 1 FROM rollouts WHERE id = %s"
                self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")
        return [
            Reward(r["rollout_id"], r["value"], r["name"], r["call_index"], r["created_at"]) for r in rows
        ]

    def rollout_stats(self, rollout_ids: Sequence[str]) -> dict[str, RolloutStats]:
        """Three indexed set queries (primary keys of calls and rewards)."""
        ids = list(dict.fromkeys(rollout_ids))
        counts: dict[str, int] = {}
        rewards: dict[str, list[Reward]] = {}
        with self._read() as conn:
            for row in conn.execute("SELECT id FROM rollouts WHERE id = ANY(%s)", (ids,)):
                counts[row["id"]], rewards[row["id"]] = 0, []
            sql = "SELECT rollout_id, COUNT(*) AS n FROM calls WHERE rollout_id = ANY(%s) GROUP BY rollout_id"
            for row in conn.execute(sql, (ids,)):
                counts[row["rollout_id"]] = row["n"]
            sql = "SELECT * FROM rewards WHERE rollout_id = ANY(%s) ORDER BY rollout_id, reward_index"
            for r in conn.execute(sql, (ids,)):
                rewards[r["rollout_id"]].append(
                    Reward(r["rollout_id"], r["value"], r["name"], r["call_index"], r["created_at"]))
        return {rid: RolloutStats(counts[rid], rewards[rid]) for rid in ids if rid in counts}

    # -- policy versions ------------------------------------------------------------------------------
    def add_policy_version(
        self,
        version: int,
        checkpoint_path: str | None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> PolicyVersion:
        pv = PolicyVersion(run_id, version, checkpoint_path, time.time(), metadata or {})
        with self._write() as conn:
            if run_id is not None:
                self._one(conn, "SELECT 1 FROM runs WHERE id = %s", (run_id,), f"run {run_id!r}")
            cur = conn.execute(
                "INSERT INTO policy_versions (run_id, version, checkpoint_path, created_at, metadata) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (run_id, version, checkpoint_path, pv.created_at, _dumps(pv.metadata)),
            )
            if cur.rowcount == 0:
                raise AlreadyExists(f"policy version {version} of run {run_id!r} already exists")
        return pv

    def list_policy_versions(self, run_id: str | None = None) -> list[PolicyVersion]:
        """Versions oldest first: those of ``run_id``, or all of them when it is None."""
        sql, args = "SELECT * FROM policy_versions", []
        if run_id is not None:
            sql, args = sql + " WHERE run_id = %s", [run_id]
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY version, created_at", args).fetchall()
        return [
            PolicyVersion(
                r["run_id"], r["version"], r["checkpoint_path"], r["created_at"], orjson.loads(r["metadata"])
            )
            for r in rows
        ]

    # -- housekeeping ---------------------------------------------------------------------------------
    def storage_bytes(self, rollout_id: str) -> int:
        with self._read() as conn:
            sql = "SELECT 1 FROM rollouts WHERE id = %s"
            self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")
            sql = (
                "SELECT COALESCE(SUM(octet_length(prompt_suffix) + octet_length(completion_ids)"
                " + octet_length(completion_logprobs)), 0) AS total FROM calls WHERE rollout_id = %s"
            )
            row = self._one(conn, sql, (rollout_id,), "the storage sum")
        return int(row["total"])

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
