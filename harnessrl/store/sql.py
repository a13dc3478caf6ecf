"""The store's queries and row handling, written once for both SQL drivers.

A driver (``sqlite.py``, ``postgres.py``) brings its connections, its transactions and the few things
its database spells differently: the placeholder (``?`` or ``%s``), how a write locks the rows it
numbers under, how a list of ids is passed, and whether an INSERT or UPDATE can return the row. How
writers and readers run at once (the concurrency model) is the driver's, in its ``_write``/``_read``.

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

import abc
import logging
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager, closing
from typing import Any, ClassVar, Protocol, Self

import orjson

from harnessrl.store.base import (
    AlreadyExists,
    BudgetExceeded,
    CallUsage,
    NewCall,
    NotFound,
    RolloutClosed,
    RolloutStats,
    Store,
    StoreError,
    usage_of,
)
from harnessrl.store.codec import ITEM_SIZE
from harnessrl.store.retention import ELIGIBLE, HELD, PurgeCounts, scope_sql
from harnessrl.store.rows import (
    CALL_COLUMNS,
    SEQ_COLUMNS,
    RolloutSeqs,
    RowLike,
    SeqCache,
    decode_call,
    dumps,
    encode_call,
    replay,
    seq_leaf,
)
from harnessrl.store.rules import (
    ROLLOUT_COLUMNS,
    check_reward_value,
    check_transition,
    check_transition_args,
    list_rollouts_sql,
    rollout_from_row,
)
from harnessrl.store.schema import StoreFeature
from harnessrl.types import (
    Call,
    CallStatus,
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

_CALLS = ", ".join(CALL_COLUMNS)
_SEQ_COLUMNS = ", ".join(SEQ_COLUMNS)


class Connection(Protocol):
    """What the shared code uses of a connection (``sqlite3.Connection``, ``psycopg.Connection``)."""

    def execute(self, sql: Any, args: Any = ..., /) -> Any: ...

    def cursor(self) -> Any: ...


def _run(r: RowLike) -> Run:
    return Run(r["id"], r["name"], orjson.loads(r["config"]), r["created_at"], r["ended_at"])


def _task(r: RowLike) -> Task:
    return Task(r["run_id"], r["id"], orjson.loads(r["input"]), TaskSplit(r["split"]))


def _reward(r: RowLike) -> Reward:
    return Reward(r["rollout_id"], r["value"], r["name"], r["call_index"], r["created_at"])


def _policy_version(r: RowLike) -> PolicyVersion:
    metadata = orjson.loads(r["metadata"])
    return PolicyVersion(r["run_id"], r["version"], r["checkpoint_path"], r["created_at"], metadata)


class SqlStore(Store):
    """``Store`` on a SQL database; subclasses supply the connections and the dialect below."""

    #: The driver's parameter placeholder.
    P: ClassVar[str]
    #: Appended to a SELECT in a write transaction to lock the rows it reads until commit ("" where the
    #: transaction already holds the whole database).
    LOCK_ROWS: ClassVar[str]
    #: Whether ``INSERT``/``UPDATE ... RETURNING`` gives back the written row.
    RETURNING: ClassVar[bool]
    #: At most this many ids in one ``_in_ids`` list (None: any number).
    MAX_IDS: ClassVar[int | None]
    #: An expression for the size in bytes of the text column ``{}``.
    OCTETS: ClassVar[str]
    #: Several processes write this store (PostgreSQL): per-rollout budgets are checked in it.
    SHARED: ClassVar[bool] = False
    #: The tables of the feature stores mixed into this driver (``assembly.py``); none in the core.
    FEATURES: ClassVar[tuple[StoreFeature, ...]] = ()

    def __init__(self, *, cache_bytes: int, lock: AbstractContextManager[Any]) -> None:
        """``lock`` guards the sequence cache and the creation clock: the driver's own, or a new one."""
        self._cache = SeqCache(cache_bytes)
        self._state_lock = lock
        self._last_created = 0.0
        marks = ", ".join([self.P] * len(CALL_COLUMNS))
        self._insert_call = f"INSERT INTO calls ({_CALLS}) VALUES ({marks})"

    # -- what a driver supplies -----------------------------------------------------------------------
    @abc.abstractmethod
    def _write(self) -> AbstractContextManager[Connection]:
        """One transaction, committed on success, else rolled back."""

    @abc.abstractmethod
    def _read(self) -> AbstractContextManager[Connection]:
        """A connection on which each statement reads one committed snapshot."""

    @abc.abstractmethod
    def _in_ids(self, ids: Sequence[str]) -> tuple[str, list[Any]]:
        """``(condition, args)``: ``column + condition`` holds when the column is one of ``ids``."""

    def _write_calls(self) -> AbstractContextManager[Connection]:
        """The transaction of one ``record_calls`` batch."""
        return self._write()

    def _select_calls(self, conn: Connection, sql: str, args: Sequence[Any]) -> Any:
        """Run a SELECT of ``calls`` columns (a driver may fetch their blobs more cheaply)."""
        return conn.execute(sql, args)

    def _text(self, value: str | None) -> str | None:
        """Free-form text as the database can store it."""
        return value

    # -- shared helpers -------------------------------------------------------------------------------
    def _one(self, conn: Connection, sql: str, args: Sequence[Any], what: str) -> RowLike:
        row: RowLike | None = conn.execute(sql, args).fetchone()
        if row is None:
            raise NotFound(f"{what} does not exist")
        return row

    def _check_run(self, conn: Connection, run_id: str, *, lock: bool = False) -> None:
        """Raise ``NotFound`` unless the run exists; with ``lock``, lock its row for this transaction."""
        sql = f"SELECT 1 FROM runs WHERE id = {self.P}{self.LOCK_ROWS if lock else ''}"
        self._one(conn, sql, (run_id,), f"run {run_id!r}")

    def _check_rollout(self, conn: Connection, rollout_id: str) -> None:
        sql = f"SELECT 1 FROM rollouts WHERE id = {self.P}"
        self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")

    def _rollout_status(self, conn: Connection, rollout_id: str) -> RolloutStatus:
        """The rollout's status, locked for this write transaction."""
        sql = f"SELECT status FROM rollouts WHERE id = {self.P}{self.LOCK_ROWS}"
        return RolloutStatus(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}")["status"])

    def _write_rollout(
        self, conn: Connection, sql: str, args: Sequence[Any], rollout_id: str
    ) -> RowLike | None:
        """Run an INSERT or UPDATE of one rollout; the row as written, None when nothing was written."""
        if self.RETURNING:
            row: RowLike | None = conn.execute(f"{sql} RETURNING {ROLLOUT_COLUMNS}", args).fetchone()
            return row
        if conn.execute(sql, args).rowcount == 0:
            return None
        sql = f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE id = {self.P}"
        return conn.execute(sql, (rollout_id,)).fetchone()

    def _next_created(self) -> float:
        """Strictly increasing creation times keep paging order identical to creation order."""
        with self._state_lock:
            self._last_created = max(time.time(), self._last_created + 1e-6)
            return self._last_created

    def _upgrade_schema(
        self, conn: Connection, found: int | None, target: int, migrations: dict[int, list[str]], where: str
    ) -> None:
        """Record the version ``target`` in a new database (``found`` None) or migrate an older one to it,
        in the caller's transaction; a newer database is refused."""
        version = target if found is None else found
        if found is None:
            conn.execute(f"INSERT INTO schema_version (version) VALUES ({self.P})", (target,))
        if version > target:
            raise StoreError(
                f"{where} has schema version {version}, newer than this harnessrl's {target}: "
                "upgrade harnessrl"
            )
        for v in range(version, target):
            log.info("migrating %s from schema version %d to %d", where, v, v + 1)
            for stmt in migrations[v]:
                conn.execute(stmt)
        conn.execute(f"UPDATE schema_version SET version = {self.P}", (target,))

    # -- runs and tasks -------------------------------------------------------------------------------
    def create_run(self, name: str, config: dict[str, Any], run_id: str | None = None) -> Run:
        run = Run(id=run_id or uuid.uuid4().hex, name=name, config=config, created_at=time.time())
        p = self.P
        with self._write() as conn:
            cur = conn.execute(
                f"INSERT INTO runs (id, name, config, created_at) VALUES ({p}, {p}, {p}, {p}) "
                "ON CONFLICT (id) DO NOTHING",
                (run.id, name, dumps(config), run.created_at),
            )
            if cur.rowcount == 0:
                raise AlreadyExists(f"run {run.id!r} already exists; pass another run_id or reuse it")
        return run

    def get_run(self, run_id: str) -> Run:
        with self._read() as conn:
            sql = f"SELECT * FROM runs WHERE id = {self.P}"
            return _run(self._one(conn, sql, (run_id,), f"run {run_id!r}"))

    def list_runs(self) -> list[Run]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created_at, id").fetchall()
        return [_run(r) for r in rows]

    def upsert_tasks(self, run_id: str, tasks: Sequence[Task]) -> None:
        """Insert or update tasks by ``(run_id, task.id)``; new tasks keep their order of first insert."""
        for task in tasks:
            if task.run_id != run_id:
                raise ValueError(f"task {task.id!r} belongs to run {task.run_id!r}, not {run_id!r}")
        p = self.P
        with self._write() as conn:
            # The run's row lock serializes position numbering between writers.
            self._check_run(conn, run_id, lock=True)
            sql = f"SELECT COALESCE(MAX(position) + 1, 0) AS start FROM tasks WHERE run_id = {p}"
            start = self._one(conn, sql, (run_id,), "the next task position")["start"]
            with closing(conn.cursor()) as cur:
                cur.executemany(
                    f"INSERT INTO tasks (run_id, id, input, split, position) VALUES ({p}, {p}, {p}, {p}, {p})"
                    " ON CONFLICT (run_id, id) DO UPDATE SET input = excluded.input, split = excluded.split",
                    [(run_id, t.id, dumps(t.input), str(t.split), start + i) for i, t in enumerate(tasks)],
                )

    def list_tasks(self, run_id: str, split: TaskSplit | None = None) -> list[Task]:
        p = self.P
        with self._read() as conn:
            self._check_run(conn, run_id)
            sql, args = f"SELECT * FROM tasks WHERE run_id = {p}", [run_id]
            if split is not None:
                sql, args = f"{sql} AND split = {p}", [*args, str(split)]
            rows = conn.execute(sql + " ORDER BY position", args).fetchall()
        return [_task(r) for r in rows]

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
        p = self.P
        with self._write() as conn:
            if run_id is not None:
                self._check_run(conn, run_id)
            row = self._write_rollout(
                conn,
                "INSERT INTO rollouts (id, run_id, task_id, group_id, input, api_key_hash, status, "
                f"policy_version, step, created_at, metadata) VALUES ({', '.join([p] * 11)}) "
                "ON CONFLICT (id) DO NOTHING",
                (rid, run_id, task_id, group_id, dumps(input), api_key_hash, str(RolloutStatus.QUEUED),
                 policy_version, step, self._next_created(), dumps(metadata or {})),
                rid,
            )  # fmt: skip
            if row is None:
                raise AlreadyExists(f"rollout {rid!r} already exists")
        return rollout_from_row(row)

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._read() as conn:
            sql = f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE id = {self.P}"
            return rollout_from_row(self._one(conn, sql, (rollout_id,), f"rollout {rollout_id!r}"))

    def rollout_key_hash(self, rollout_id: str) -> str:
        with self._read() as conn:
            sql = f"SELECT api_key_hash FROM rollouts WHERE id = {self.P}"
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
        p = self.P
        with self._write() as conn:
            check_transition(rollout_id, self._rollout_status(conn, rollout_id), status)
            row = self._write_rollout(
                conn,
                f"UPDATE rollouts SET status = {p}, failure_kind = COALESCE({p}, failure_kind), "
                f"error = COALESCE({p}, error), exit_code = COALESCE({p}, exit_code), "
                f"logs = COALESCE({p}, logs), "
                f"runner_handle = COALESCE({p}, runner_handle), started_at = COALESCE({p}, started_at), "
                f"finished_at = COALESCE({p}, finished_at) WHERE id = {p}",
                (str(status), None if failure_kind is None else str(FailureKind(failure_kind)),
                 self._text(error), exit_code, self._text(logs), runner_handle,
                 now if status is RolloutStatus.RUNNING else None, now if status.terminal else None,
                 rollout_id),
                rollout_id,
            )  # fmt: skip
            if row is None:
                raise NotFound(f"rollout {rollout_id!r} does not exist")
        if status.terminal:
            with self._state_lock:
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
        sql, args = list_rollouts_sql(self.P, run_id=run_id, status=status, step=step, limit=limit,
                                      offset=offset, task_id=task_id, failure_kind=failure_kind)
        with self._read() as conn:
            return [rollout_from_row(r) for r in conn.execute(sql, args).fetchall()]

    # -- calls ----------------------------------------------------------------------------------------
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        if not calls:
            return []
        with self._write_calls() as conn:
            indices, staged = self._insert_calls(conn, calls)
        self._keep_staged(staged)
        return indices

    def _insert_calls(self, conn: Connection, calls: Sequence[NewCall]) -> tuple[list[int], dict[str, RolloutSeqs]]:
        """Insert ``calls`` inside the open write transaction; the staged sequences are cached once it commits."""
        now = time.time()
        indices: list[int] = []
        staged = self._seqs_for_write(conn, sorted({c.rollout_id for c in calls}))
        if self.SHARED:
            self._check_budgets(conn, calls)
        rows = []
        for call in calls:
            seqs = staged[call.rollout_id]
            indices.append(seqs.next_index)
            rows.append(encode_call(call, seqs, now))
        with closing(conn.cursor()) as cur:
            cur.executemany(self._insert_call, rows)
        return indices, staged

    def _keep_staged(self, staged: dict[str, RolloutSeqs]) -> None:
        with self._state_lock:
            for rollout_id, seqs in staged.items():
                self._cache.put(rollout_id, seqs)

    def _check_budgets(self, conn: Connection, calls: Sequence[NewCall]) -> None:
        """Refuse the batch if an answered call would take its rollout past its budgets (rows locked)."""
        used: dict[str, list[int]] = {}
        for call in calls:
            if call.status != CallStatus.OK or (call.max_calls is None and call.max_tokens is None):
                continue
            if call.rollout_id not in used:
                row = conn.execute(
                    f"SELECT COUNT(*) AS n, COALESCE(SUM({self.OCTETS.format('completion_ids')}), 0) AS b"
                    f" FROM calls WHERE rollout_id = {self.P} AND status = {self.P}",
                    (call.rollout_id, CallStatus.OK.value),
                ).fetchone()
                used[call.rollout_id] = [int(row["n"]), int(row["b"]) // ITEM_SIZE]
            u = used[call.rollout_id]
            u[0] += 1
            u[1] += sum(len(c.token_ids) for c in call.choices)
            if call.max_calls is not None and u[0] > call.max_calls:
                raise BudgetExceeded(f"the rollout's call budget ({call.max_calls} calls) is used up", "calls")
            if call.max_tokens is not None and u[1] > call.max_tokens:
                raise BudgetExceeded(
                    f"the rollout's token budget ({call.max_tokens} completion tokens) is used up", "tokens")

    def _seqs_for_write(self, conn: Connection, rollout_ids: list[str]) -> dict[str, RolloutSeqs]:
        """Lock the rollouts (in id order) and stage private copies of their sequences, checked against
        the database's last call index: another writer may have written since the cache was filled."""
        cond, args = self._in_ids(rollout_ids)
        locking = conn.execute(
            f"SELECT id, status FROM rollouts WHERE id{cond} ORDER BY id{self.LOCK_ROWS}", args
        )
        # A separate statement, so a new snapshot taken once the locks are held: it sees the calls of
        # whoever held them before us (in the locking statement itself a subquery would not).
        last_indices = conn.execute(
            "SELECT r.id, (SELECT MAX(call_index) FROM calls c WHERE c.rollout_id = r.id) AS last"
            f" FROM rollouts r WHERE r.id{cond}",
            args,
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
            with self._state_lock:
                cached = self._cache.get(rollout_id)
                if cached is not None and cached.next_index == next_index:
                    staged[rollout_id] = cached.copy()
                    continue
            seqs = staged[rollout_id] = RolloutSeqs()
            sql = f"SELECT {_SEQ_COLUMNS} FROM calls WHERE rollout_id = {self.P} ORDER BY call_index"
            for call_row, _, leaf in replay(self._select_calls(conn, sql, (rollout_id,))):
                seqs.add(seq_leaf(leaf), call_row["parent_index"], call_row["prefix_len"])
        return staged

    def get_calls(self, rollout_id: str) -> list[Call]:
        p = self.P
        with self._read() as conn:
            sql = f"SELECT {_CALLS} FROM calls WHERE rollout_id = {p} ORDER BY call_index"
            rows = self._select_calls(conn, sql, (rollout_id,)).fetchall()
            if not rows:
                self._check_rollout(conn, rollout_id)
        return [decode_call(row, prompt, leaf.request) for row, prompt, leaf in replay(rows)]

    def get_call(self, rollout_id: str, index: int) -> Call:
        # Only the call's ancestors (the parents its prompt prefix comes from) are read.
        p = self.P
        with self._read() as conn:
            sql = (
                "WITH RECURSIVE chain (call_index, parent_index) AS ("
                f" SELECT call_index, parent_index FROM calls WHERE rollout_id = {p} AND call_index = {p}"
                " UNION ALL SELECT c.call_index, c.parent_index FROM calls c JOIN chain"
                f" ON c.rollout_id = {p} AND c.call_index = chain.parent_index)"
                f" SELECT {_CALLS} FROM calls WHERE rollout_id = {p}"
                " AND call_index IN (SELECT call_index FROM chain) ORDER BY call_index"
            )
            rows = self._select_calls(conn, sql, (rollout_id, index, rollout_id, rollout_id)).fetchall()
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
        p = self.P
        with self._write() as conn:
            if self._rollout_status(conn, rollout_id) == RolloutStatus.CANCELLED:
                raise RolloutClosed(f"rollout {rollout_id!r} was cancelled; it takes no rewards")
            if call_index is not None:
                sql = f"SELECT 1 FROM calls WHERE rollout_id = {p} AND call_index = {p}"
                self._one(conn, sql, (rollout_id, call_index), f"call {call_index} of rollout {rollout_id!r}")
            sql = f"SELECT COALESCE(MAX(reward_index) + 1, 0) AS next FROM rewards WHERE rollout_id = {p}"
            index = self._one(conn, sql, (rollout_id,), "the next reward index")["next"]
            conn.execute(
                "INSERT INTO rewards (rollout_id, reward_index, name, value, call_index, created_at) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
                (rollout_id, index, name, value, call_index, reward.created_at),
            )
        return reward

    def get_rewards(self, rollout_id: str) -> list[Reward]:
        p = self.P
        with self._read() as conn:
            sql = f"SELECT * FROM rewards WHERE rollout_id = {p} ORDER BY reward_index"
            rows = conn.execute(sql, (rollout_id,)).fetchall()
            if not rows:
                self._check_rollout(conn, rollout_id)
        return [_reward(r) for r in rows]

    def rollout_stats(self, rollout_ids: Sequence[str]) -> dict[str, RolloutStats]:
        """Three indexed set queries per ``MAX_IDS`` ids (primary keys of calls and rewards)."""
        ids = list(dict.fromkeys(rollout_ids))
        counts: dict[str, int] = {}
        rewards: dict[str, list[Reward]] = {}
        with self._read() as conn:
            size = self.MAX_IDS or max(len(ids), 1)
            for i in range(0, len(ids), size):
                cond, args = self._in_ids(ids[i : i + size])
                for row in conn.execute(f"SELECT id FROM rollouts WHERE id{cond}", args):
                    counts[row["id"]], rewards[row["id"]] = 0, []
                sql = f"SELECT rollout_id, COUNT(*) AS n FROM calls WHERE rollout_id{cond}"
                for row in conn.execute(sql + " GROUP BY rollout_id", args):
                    counts[row["rollout_id"]] = row["n"]
                sql = f"SELECT * FROM rewards WHERE rollout_id{cond} ORDER BY rollout_id, reward_index"
                for r in conn.execute(sql, args):
                    rewards[r["rollout_id"]].append(_reward(r))
        return {rid: RolloutStats(counts[rid], rewards[rid]) for rid in ids if rid in counts}

    def call_usage(self, rollout_ids: Sequence[str]) -> CallUsage:
        """One set query per ``MAX_IDS`` ids over the columns a purge keeps (no token array is read)."""
        ids = list(dict.fromkeys(rollout_ids))
        calls = prompt = completion = refused = clamped = stopped = 0
        latency = 0.0
        with self._read() as conn:
            size = self.MAX_IDS or max(len(ids), 1)
            for i in range(0, len(ids), size):
                cond, args = self._in_ids(ids[i : i + size])
                sql = f"SELECT prompt_len, choices, latency_s, status, sampling FROM calls WHERE rollout_id{cond}"
                for row in conn.execute(sql, args):
                    choices = orjson.loads(row["choices"])
                    calls += 1
                    prompt += row["prompt_len"]
                    completion += sum(int(choice[0]) for choice in choices)
                    latency += row["latency_s"] or 0.0
                    r, k, s = usage_of(row["status"], row["sampling"], [choice[2] for choice in choices])
                    refused, clamped, stopped = refused + r, clamped + k, stopped + s
        return CallUsage(calls, prompt, completion, latency, refused, clamped, stopped)

    # -- policy versions ------------------------------------------------------------------------------
    def add_policy_version(
        self,
        version: int,
        checkpoint_path: str | None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> PolicyVersion:
        pv = PolicyVersion(run_id, version, checkpoint_path, time.time(), metadata or {})
        p = self.P
        with self._write() as conn:
            if run_id is not None:
                self._check_run(conn, run_id)
            cur = conn.execute(
                "INSERT INTO policy_versions (run_id, version, checkpoint_path, created_at, metadata) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING",
                (run_id, version, checkpoint_path, pv.created_at, dumps(pv.metadata)),
            )
            if cur.rowcount == 0:
                raise AlreadyExists(f"policy version {version} of run {run_id!r} already exists")
        return pv

    def list_policy_versions(self, run_id: str | None = None) -> list[PolicyVersion]:
        """Versions oldest first: those of ``run_id``, or all of them when it is None."""
        sql, args = "SELECT * FROM policy_versions", []
        if run_id is not None:
            sql, args = f"{sql} WHERE run_id = {self.P}", [run_id]
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY version, created_at", args).fetchall()
        return [_policy_version(r) for r in rows]

    # -- retention (``retention.py``) -----------------------------------------------------------------
    def end_run(self, run_id: str, ended: bool = True) -> Run:
        p = self.P
        with self._write() as conn:
            self._check_run(conn, run_id, lock=True)
            value = "COALESCE(ended_at, " + p + ")" if ended else p
            now = time.time() if ended else None
            conn.execute(f"UPDATE runs SET ended_at = {value} WHERE id = {p}", (now, run_id))
            return _run(self._one(conn, f"SELECT * FROM runs WHERE id = {p}", (run_id,), f"run {run_id!r}"))

    def purge(
        self,
        *,
        finished_before: float,
        run_ids: Sequence[str | None] | None = None,
        dry_run: bool = True,
        batch_rollouts: int = 100,
    ) -> PurgeCounts:
        """Purge in transactions of ``batch_rollouts`` rollouts each, so writers get in between."""
        if run_ids is None:
            return self._purge_scope(finished_before, None, dry_run, batch_rollouts)
        named = [r for r in dict.fromkeys(run_ids) if r is not None]
        size = self.MAX_IDS or max(len(named), 1)
        scopes: list[list[str | None]] = [list(named[i : i + size]) for i in range(0, len(named), size)]
        if None in run_ids:
            scopes.append([None])
        total = PurgeCounts()
        for scope in scopes:
            total += self._purge_scope(finished_before, scope, dry_run, batch_rollouts)
        return total

    def _purge_scope(
        self, cutoff: float, scope: list[str | None] | None, dry_run: bool, batch: int
    ) -> PurgeCounts:
        p = self.P
        named = [r for r in scope or [] if r is not None]
        in_cond, in_args = self._in_ids(named) if named else ("", [])
        cond, _ = scope_sql(scope, in_cond)
        eligible, args = ELIGIBLE.format(p=p, scope=cond), [cutoff, *in_args]
        logs, text = self.OCTETS.format("r.logs"), self.OCTETS.format
        call_bytes = (
            f"COALESCE(SUM({text('request')} + COALESCE({text('response')}, 0) + LENGTH(prompt_suffix)"
            " + LENGTH(completion_ids) + LENGTH(completion_logprobs)), 0)"
        )
        with self._read() as conn:
            held_sql = f"SELECT COUNT(*) AS n {HELD.format(p=p, scope=cond)}"
            held = int(conn.execute(held_sql, args).fetchone()["n"])
            if dry_run:
                row = conn.execute(
                    f"SELECT COUNT(DISTINCT r.run_id) AS runs, COUNT(*) AS n, COALESCE(SUM({logs}), 0) AS logs"
                    f" {eligible}", args).fetchone()  # fmt: skip
                calls = conn.execute(
                    f"SELECT COUNT(*) AS n, {call_bytes} AS bytes FROM calls"
                    f" WHERE rollout_id IN (SELECT r.id {eligible})", args).fetchone()  # fmt: skip
                return PurgeCounts(int(row["runs"]), int(row["n"]), int(calls["n"]),
                                   int(row["logs"]) + int(calls["bytes"]), held)  # fmt: skip
        runs: set[str] = set()
        n_rollouts = n_calls = n_bytes = 0
        lock = f"{self.LOCK_ROWS} OF r" if self.LOCK_ROWS else ""
        while True:
            now = time.time()
            with self._write() as conn:
                rows = conn.execute(
                    f"SELECT r.id, r.run_id, COALESCE({logs}, 0) AS logs {eligible}"
                    f" ORDER BY r.finished_at, r.id LIMIT {int(batch)}{lock}", args).fetchall()  # fmt: skip
                if not rows:
                    break
                ids = [r["id"] for r in rows]
                ic, ia = self._in_ids(ids)
                calls = conn.execute(
                    f"SELECT COUNT(*) AS n, {call_bytes} AS bytes FROM calls WHERE rollout_id{ic}", ia
                ).fetchone()
                conn.execute(
                    f"UPDATE calls SET request = '{{}}', request_keep = NULL, response = NULL, response_elided = NULL,"
                    f" prompt_suffix = {p}, completion_ids = {p}, completion_logprobs = {p}, purged_at = {p}"
                    f" WHERE rollout_id{ic}",
                    [b"", b"", b"", now, *ia])  # fmt: skip
                conn.execute(f"UPDATE rollouts SET logs = NULL, purged_at = {p} WHERE id{ic}", [now, *ia])
            runs.update(r["run_id"] for r in rows if r["run_id"] is not None)
            n_rollouts += len(rows)
            n_calls += int(calls["n"])
            n_bytes += int(calls["bytes"]) + sum(int(r["logs"]) for r in rows)
            with self._state_lock:
                for rid in ids:
                    self._cache.discard(rid)
        return PurgeCounts(len(runs), n_rollouts, n_calls, n_bytes, held)

    # -- housekeeping ---------------------------------------------------------------------------------
    def storage_bytes(self, rollout_id: str) -> int:
        p = self.P
        with self._read() as conn:
            self._check_rollout(conn, rollout_id)
            sql = (
                "SELECT COALESCE(SUM(LENGTH(prompt_suffix) + LENGTH(completion_ids)"
                f" + LENGTH(completion_logprobs)), 0) AS total FROM calls WHERE rollout_id = {p}"
            )
            return int(self._one(conn, sql, (rollout_id,), "the storage sum")["total"])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
