"""The embedded store: one SQLite file in WAL mode.

Concurrency model: one writer connection behind a lock (SQLite has a single writer anyway) and one
reader connection per thread, which WAL lets read a consistent snapshot while the writer commits. Every
write method is one ``BEGIN IMMEDIATE ... COMMIT`` transaction; ``record_calls`` commits a whole batch
at once (the gateway's group commit). ``synchronous=NORMAL`` (default) makes a commit survive a crash
of this process the moment it returns; ``FULL`` also survives power loss, at an fsync per commit.

Rules the store enforces (the same in every driver):
- Rollout status follows ``ROLLOUT_TRANSITIONS``; anything else raises ``IllegalTransition``.
  ``failed`` and ``timed_out`` need a ``failure_kind`` (agent vs infra decides whether it is trained on).
- Calls may be recorded while a rollout is ``queued`` or ``running`` (a harness may call before the
  runner reports it running); on a terminal rollout they raise ``RolloutClosed``.
- Rewards may be added in any state but ``cancelled`` (verifiers run after the harness exits).
- ``record_calls`` is all or nothing: one unknown or closed rollout fails the batch with nothing written,
  and the caller may retry the other calls.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

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
from harnessrl.store.rules import ROLLOUT_COLUMNS as _ROLLOUT_COLUMNS
from harnessrl.store.rules import (
    check_reward_value,
    check_transition,
    check_transition_args,
    list_rollouts_sql,
)
from harnessrl.store.rules import rollout_from_row as _rollout
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

log = logging.getLogger(__name__)

Synchronous = Literal["NORMAL", "FULL"]

_CALLS = ", ".join(CALL_COLUMNS)
_INSERT_CALL = f"INSERT INTO calls ({_CALLS}) VALUES ({', '.join('?' * len(CALL_COLUMNS))})"
_SEQ_COLUMNS = ", ".join(SEQ_COLUMNS)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


class SqliteStore(Store):
    """``Store`` on one SQLite file (or ``:memory:``, which serves reads from the writer connection)."""

    def __init__(
        self, path: str | Path, *, synchronous: Synchronous = "NORMAL", cache_bytes: int = 64 << 20
    ) -> None:
        self.path = str(path)
        self._memory = self.path == ":memory:"
        if not self._memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._synchronous = synchronous.upper()
        if self._synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._cache = SeqCache(cache_bytes)
        self._last_created = 0.0
        self._conn: sqlite3.Connection | None = self._connect()
        try:
            self._migrate(self._conn)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        """``sqlite:///relative.db``, ``sqlite:////abs.db``, ``sqlite:///:memory:``; ``?synchronous=FULL``."""
        rest, _, query = url.removeprefix("sqlite://").removeprefix("/").partition("?")
        options = {k: v[-1] for k, v in parse_qs(query).items()}
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise ValueError(f"unknown sqlite store options {sorted(unknown)} in {url!r}; known: synchronous")
        sync = options.get("synchronous", "NORMAL").upper()
        return cls(rest or ":memory:", synchronous=sync)  # type: ignore[arg-type]

    # -- connections ----------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.row_factory = sqlite3.Row
        if not self._memory:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(
                    f"could not put {self.path} in WAL mode (got {mode}); is it on a network disk?"
                )
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in ddl("sqlite"):
                conn.execute(stmt)
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            version = SCHEMA_VERSION if row is None else row[0]
            if row is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this harnessrl's "
                    f"{SCHEMA_VERSION}: upgrade harnessrl"
                )
            for v in range(version, SCHEMA_VERSION):
                log.info("migrating %s from schema version %d to %d", self.path, v, v + 1)
                for stmt in MIGRATIONS[v]:
                    conn.execute(stmt)
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _writer(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is closed")
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One immediate transaction on the writer connection, committed on success, else rolled back."""
        with self._lock:
            conn = self._writer()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """This thread's reader connection; single statements see one committed snapshot."""
        if self._memory:
            with self._lock:
                yield self._writer()
            return
        self._writer()  # raises when closed
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._lock:
                conn = self._connect()
                conn.execute("PRAGMA query_only = ON")
                self._readers.append(conn)
            self._local.conn = conn
        yield conn

    def _one(self, conn: sqlite3.Connection, sql: str, args: Sequence[Any], what: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(sql, args).fetchone()
        if row is None:
            raise NotFound(f"{what} does not exist")
        return row

    # -- runs and tasks -------------------------------------------------------------------------------
    def create_run(self, name: str, config: dict[str, Any], run_id: str | None = None) -> Run:
        run = Run(id=run_id or uuid.uuid4().hex, name=name, config=config, created_at=time.time())
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise AlreadyExists(f"run {run.id!r} already exists; pass another run_id or reuse it")
            conn.execute(
                "INSERT INTO runs (id, name, config, created_at) VALUES (?, ?, ?, ?)",
                (run.id, name, _dumps(config), run.created_at),
            )
        return run

    def get_run(self, run_id: str) -> Run:
        with self._read() as conn:
            row = self._one(conn, "SELECT * FROM runs WHERE id = ?", (run_id,), f"run {run_id!r}")
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
            self._one(conn, "SELECT 1 FROM runs WHERE id = ?", (run_id,), f"run {run_id!r}")
            (start,) = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM tasks WHERE run_id = ?", (run_id,)
            ).fetchone()
            conn.executemany(
                "INSERT INTO tasks (run_id, id, input, split, position) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, id) DO UPDATE SET input = excluded.input, split = excluded.split",
                [(run_id, t.id, _dumps(t.input), str(t.split), start + i) for i, t in enumerate(tasks)],
            )

    def list_tasks(self, run_id: str, split: TaskSplit | None = None) -> list[Task]:
        with self._read() as conn:
            self._one(conn, "SELECT 1 FROM runs WHERE id = ?", (run_id,), f"run {run_id!r}")
            sql, args = "SELECT * FROM tasks WHERE run_id = ?", [run_id]
            if split is not None:
                sql, args = sql + " AND split = ?", [*args, str(split)]
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
        with self._write() as conn:
            if run_id is not None:
                self._one(conn, "SELECT 1 FROM runs WHERE id = ?", (run_id,), f"run {run_id!r}")
            if conn.execute("SELECT 1 FROM rollouts WHERE id = ?", (rid,)).fetchone():
                raise AlreadyExists(f"rollout {rid!r} already exists")
            # Strictly increasing creation times keep paging order identical to creation order.
            created = self._last_created = max(time.time(), self._last_created + 1e-6)
            conn.execute(
                "INSERT INTO rollouts (id, run_id, task_id, group_id, input, api_key_hash, status, "
                "policy_version, step, created_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, run_id, task_id, group_id, _dumps(input), api_key_hash, str(RolloutStatus.QUEUED),
                 policy_version, step, created, _dumps(metadata or {})),
            )  # fmt: skip
            row = conn.execute(f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts WHERE id = ?", (rid,)).fetchone()
        return _rollout(row)

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._read() as conn:
            sql = f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts WHERE id = ?"
            return _rollout(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}"))

    def rollout_key_hash(self, rollout_id: str) -> str:
        with self._read() as conn:
            sql = "SELECT api_key_hash FROM rollouts WHERE id = ?"
            return str(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")[0])

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
            sql = "SELECT status FROM rollouts WHERE id = ?"
            current = RolloutStatus(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")[0])
            check_transition(rollout_id, current, status)
            conn.execute(
                "UPDATE rollouts SET status = ?, failure_kind = COALESCE(?, failure_kind), "
                "error = COALESCE(?, error), exit_code = COALESCE(?, exit_code), logs = COALESCE(?, logs), "
                "runner_handle = COALESCE(?, runner_handle), started_at = COALESCE(?, started_at), "
                "finished_at = COALESCE(?, finished_at) WHERE id = ?",
                (str(status), None if failure_kind is None else str(FailureKind(failure_kind)), error,
                 exit_code, logs, runner_handle, now if status is RolloutStatus.RUNNING else None,
                 now if status.terminal else None, rollout_id),
            )  # fmt: skip
            row = conn.execute(
                f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts WHERE id = ?", (rollout_id,)
            ).fetchone()
            if status.terminal:
                self._cache.discard(rollout_id)
        return _rollout(row)

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
        sql, args = list_rollouts_sql("?", run_id=run_id, status=status, step=step, limit=limit,
                                      offset=offset, task_id=task_id, failure_kind=failure_kind)
        with self._read() as conn:
            return [_rollout(r) for r in conn.execute(sql, args).fetchall()]

    # -- calls ----------------------------------------------------------------------------------------
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        if not calls:
            return []
        now = time.time()
        indices: list[int] = []
        with self._lock:
            with self._write() as conn:
                staged = self._seqs_for_write(conn, list(dict.fromkeys(c.rollout_id for c in calls)))
                rows = []
                for call in calls:
                    seqs = staged[call.rollout_id]
                    indices.append(seqs.next_index)
                    rows.append(encode_call(call, seqs, now))
                conn.executemany(_INSERT_CALL, rows)
            for rollout_id, seqs in staged.items():
                self._cache.put(rollout_id, seqs)
        return indices

    def _seqs_for_write(self, conn: sqlite3.Connection, rollout_ids: list[str]) -> dict[str, RolloutSeqs]:
        """Private copies of the rollouts' sequences, checked against the database (the cache may lag)."""
        found = {
            row[0]: row
            for row in conn.execute(
                "SELECT id, status, (SELECT MAX(call_index) FROM calls WHERE rollout_id = r.id)"
                f" FROM rollouts r WHERE id IN ({', '.join('?' * len(rollout_ids))})",
                rollout_ids,
            )
        }
        staged = {}
        for rollout_id in rollout_ids:
            if rollout_id not in found:
                raise NotFound(f"rollout {rollout_id!r} does not exist")
            _, status, last_index = found[rollout_id]
            if RolloutStatus(status).terminal:
                raise RolloutClosed(f"rollout {rollout_id!r} is {status}; no more calls can be recorded")
            next_index = 0 if last_index is None else last_index + 1
            cached = self._cache.get(rollout_id)
            if cached is not None and cached.next_index == next_index:
                staged[rollout_id] = cached.copy()
                continue
            seqs = staged[rollout_id] = RolloutSeqs()
            rows = conn.execute(
                f"SELECT {_SEQ_COLUMNS} FROM calls WHERE rollout_id = ? ORDER BY call_index", (rollout_id,)
            )
            for call_row, _, leaf in replay(rows):
                seqs.add(leaf, call_row["parent_index"], call_row["prefix_len"])
        return staged

    def get_calls(self, rollout_id: str) -> list[Call]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_CALLS} FROM calls WHERE rollout_id = ? ORDER BY call_index", (rollout_id,)
            ).fetchall()
            if not rows:
                self._one(
                    conn, "SELECT 1 FROM rollouts WHERE id = ?", (rollout_id,), f"rollout {rollout_id!r}"
                )
        return [decode_call(row, prompt, leaf.request) for row, prompt, leaf in replay(rows)]

    def get_call(self, rollout_id: str, index: int) -> Call:
        # Only the call's ancestors (the parents its prompt prefix comes from) are read.
        with self._read() as conn:
            rows = conn.execute(
                "WITH RECURSIVE chain (call_index, parent_index) AS ("
                " SELECT call_index, parent_index FROM calls WHERE rollout_id = ? AND call_index = ?"
                " UNION ALL SELECT c.call_index, c.parent_index FROM calls c JOIN chain"
                " ON c.rollout_id = ? AND c.call_index = chain.parent_index)"
                f" SELECT {_CALLS} FROM calls WHERE rollout_id = ?"
                " AND call_index IN (SELECT call_index FROM chain) ORDER BY call_index",
                (rollout_id, index, rollout_id, rollout_id),
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
            sql = "SELECT status FROM rollouts WHERE id = ?"
            status = self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")[0]
            if status == RolloutStatus.CANCELLED:
                raise RolloutClosed(f"rollout {rollout_id!r} was cancelled; it takes no rewards")
            if call_index is not None:
                sql = "SELECT 1 FROM calls WHERE rollout_id = ? AND call_index = ?"
                self._one(conn, sql, (rollout_id, call_index), f"call {call_index} of rollout {rollout_id!r}")
            (index,) = conn.execute(
                "SELECT COALESCE(MAX(reward_index) + 1, 0) FROM rewards WHERE rollout_id = ?", (rollout_id,)
            ).fetchone()
            conn.execute(
                "INSERT INTO rewards (rollout_id, reward_index, name, value, call_index, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (rollout_id, index, name, value, call_index, reward.created_at),
            )
        return reward

    def get_rewards(self, rollout_id: str) -> list[Reward]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM rewards WHERE rollout_id = ? ORDER BY reward_index", (rollout_id,)
            ).fetchall()
            if not rows:
                self._one(
                    conn, "SELECT 1 FROM rollouts WHERE id = ?", (rollout_id,), f"rollout {rollout_id!r}"
                )
        return [
            Reward(r["rollout_id"], r["value"], r["name"], r["call_index"], r["created_at"]) for r in rows
        ]

    def rollout_stats(self, rollout_ids: Sequence[str]) -> dict[str, RolloutStats]:
        """Three indexed set queries per chunk of ids (primary keys of calls and rewards)."""
        ids = list(dict.fromkeys(rollout_ids))
        counts: dict[str, int] = {}
        rewards: dict[str, list[Reward]] = {}
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(f"SELECT id FROM rollouts WHERE id IN ({marks})", chunk):
                    counts[row[0]], rewards[row[0]] = 0, []
                sql = f"SELECT rollout_id, COUNT(*) FROM calls WHERE rollout_id IN ({marks}) GROUP BY rollout_id"
                for rid, n in conn.execute(sql, chunk):
                    counts[rid] = n
                sql = f"SELECT * FROM rewards WHERE rollout_id IN ({marks}) ORDER BY rollout_id, reward_index"
                for r in conn.execute(sql, chunk):
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
                self._one(conn, "SELECT 1 FROM runs WHERE id = ?", (run_id,), f"run {run_id!r}")
            try:
                conn.execute(
                    "INSERT INTO policy_versions (run_id, version, checkpoint_path, created_at, metadata) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (run_id, version, checkpoint_path, pv.created_at, _dumps(pv.metadata)),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"policy version {version} of run {run_id!r} already exists") from None
        return pv

    def list_policy_versions(self, run_id: str | None = None) -> list[PolicyVersion]:
        """Versions oldest first: those of ``run_id``, or all of them when it is None."""
        sql, args = "SELECT * FROM policy_versions", []
        if run_id is not None:
            sql, args = sql + " WHERE run_id = ?", [run_id]
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
            self._one(conn, "SELECT 1 FROM rollouts WHERE id = ?", (rollout_id,), f"rollout {rollout_id!r}")
            (total,) = conn.execute(
                "SELECT COALESCE(SUM(LENGTH(prompt_suffix) + LENGTH(completion_ids)"
                " + LENGTH(completion_logprobs)), 0) FROM calls WHERE rollout_id = ?",
                (rollout_id,),
            ).fetchone()
        return int(total)

    def close(self) -> None:
        with self._lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
