"""The store at scale: PostgreSQL, shared by any number of gateway, controller and trainer processes.

Same schema (``schema.py``), queries (``sql.py``), row codec (``rows.py``) and rules (``rules.py``) as
SQLite; what differs is how writes stay correct when several *processes* write one database at once:

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

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harnessrl.store.base import StoreError
from harnessrl.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    ddl,
    feature_tables,
    features_ddl,
    with_features,
)
from harnessrl.store.sql import SqlStore

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg.sql import SQL, Identifier
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the PostgreSQL store needs psycopg 3: pip install 'harnessrl[postgres]' "
        "(psycopg[binary] and psycopg_pool)"
    ) from exc

#: Key of the advisory lock that serializes migrations (any constant unique to harnessrl).
_MIGRATION_LOCK = 0x6872_6C73_746F_7265  # "hrlstore"
_OPTIONS = {"pool_size", "schema"}


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


class PostgresStore(SqlStore):
    """``Store`` on a PostgreSQL database; safe to share between threads and between processes."""

    P = "%s"
    #: Per-rollout numbering happens under the rollout's (or run's) row lock; FOR NO KEY UPDATE still
    #: lets other transactions insert rows that reference it.
    LOCK_ROWS = " FOR NO KEY UPDATE"
    RETURNING = True
    MAX_IDS = None  # ids travel as one array parameter
    OCTETS = "OCTET_LENGTH({})"
    SHARED = True  # several gateways: budgets are checked under the rollout's lock

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
        super().__init__(cache_bytes=cache_bytes, lock=threading.Lock())
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
            if row is not None and row[0] == SCHEMA_VERSION and self._features_present(conn):
                return
            for stmt in [*ddl("postgresql"), *features_ddl(self.FEATURES)]:
                conn.execute(stmt)
            self._upgrade_schema(conn, None if row is None else row[0], SCHEMA_VERSION,
                                with_features(MIGRATIONS, self.FEATURES), self.url)

    def _features_present(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the feature stores' tables exist (a database the bare driver created lacks them)."""
        names = feature_tables(self.FEATURES)
        if not names:
            return True
        found = conn.execute("SELECT " + ", ".join(["to_regclass(%s) IS NOT NULL"] * len(names)), names).fetchone()
        return found is not None and all(found)

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

    @contextmanager
    def _write_calls(self) -> Iterator[psycopg.Connection[Any]]:
        """Pipelined: BEGIN, lock and last-index queries travel together, then the inserts and COMMIT,
        so a batch costs two round trips to the server instead of six.

        A connection lost during COMMIT (the server restarts) leaves the outcome unknown: the transaction
        id, read in the first round trip, tells whether it committed, so the batch is neither lost nor,
        when the caller retries, recorded twice."""
        xid = None
        try:
            with self._pool_or_raise().connection() as conn, conn.pipeline():
                with conn.transaction():
                    cur = conn.execute("SELECT txid_current()")
                    yield conn
                    xid = cur.fetchone()["txid_current"]  # already here: the body's reads synced the pipeline
        except psycopg.OperationalError:
            if xid is None or not self._committed(xid):
                raise

    def _committed(self, xid: int, wait_s: float = 60.0) -> bool:
        """Whether transaction ``xid`` committed, asked on a new connection (waits for the server)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with self._pool_or_raise().connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                    status = conn.execute("SELECT txid_status(%s)", (xid,)).fetchone()["txid_status"]
                if status != "in progress":
                    return status == "committed"
            except (psycopg.OperationalError, PoolTimeout):
                if time.monotonic() > deadline:
                    return False
            time.sleep(0.2)

    def _in_ids(self, ids: Sequence[str]) -> tuple[str, list[Any]]:
        return " = ANY(%s)", [list(ids)]

    def _select_calls(self, conn: psycopg.Connection[Any], sql: str, args: Sequence[Any]) -> Any:
        return conn.execute(sql, args, binary=True)  # blobs as bytes, without hex text in between

    def _text(self, value: str | None) -> str | None:
        return None if value is None else value.replace("\x00", "\ufffd")

    # -- housekeeping ---------------------------------------------------------------------------------
    def reclaim_space(self, full: bool = False) -> str:
        """Nothing to do here: autovacuum makes the freed rows' space reusable (the files do not shrink)."""
        return (
            "PostgreSQL: autovacuum makes the freed space reusable for new rows; the files do not shrink "
            "(VACUUM FULL calls, rollouts would, under an exclusive lock: run it in a quiet hour if needed)"
        )

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
