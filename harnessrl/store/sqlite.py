"""The embedded store: one SQLite file in WAL mode.

Concurrency model: one writer connection behind a lock (SQLite has a single writer anyway) and one
reader connection per thread, which WAL lets read a consistent snapshot while the writer commits. Every
write method is one ``BEGIN IMMEDIATE ... COMMIT`` transaction; ``record_calls`` commits a whole batch
at once (the gateway's group commit). ``synchronous=NORMAL`` (default) makes a commit survive a crash
of this process the moment it returns; ``FULL`` also survives power loss, at an fsync per commit.

The queries, and the rules the store enforces (the same in every driver), are in ``sql.py``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

from harnessrl.store.base import NewCall, StoreError
from harnessrl.store.schema import MIGRATIONS, SCHEMA_VERSION, ddl, features_ddl, with_features
from harnessrl.store.sql import SqlStore

Synchronous = Literal["NORMAL", "FULL"]
#: How long a write waits for another connection's write lock (the connection's ``timeout``).
BUSY_TIMEOUT_MS = 30_000
#: SQLite's default, kept by the writer connection: a commit that leaves the WAL at this many pages or more
#: checkpoints it (the nowait connection never does).
WAL_AUTOCHECKPOINT = 1000
#: ``record_calls_nowait`` refuses one batch in this many (see there).
NOWAIT_CHECKPOINT_EVERY = 64


class SqliteStore(SqlStore):
    """``Store`` on one SQLite file (or ``:memory:``, which serves reads from the writer connection)."""

    P = "?"
    LOCK_ROWS = ""  # BEGIN IMMEDIATE already holds the database's one write lock
    RETURNING = False  # needs SQLite 3.35 (2021); the row is read back in the same transaction
    MAX_IDS = 500  # host parameters per statement: 999 before SQLite 3.32
    OCTETS = "LENGTH(CAST({} AS BLOB))"  # octet_length() needs SQLite 3.43

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
        self._nowait_batches = 0
        super().__init__(cache_bytes=cache_bytes, lock=self._lock)  # the cache changes only under it
        self._local = threading.local()
        #: One reader per thread, with its thread: a reader of a thread that has ended is closed when the next
        #: reader opens (worker pools such as anyio's end idle threads, and each reader holds a page cache and
        #: file handles).
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._conn: sqlite3.Connection | None = self._connect()
        self._nowait: sqlite3.Connection | None = None
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
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
        conn.row_factory = sqlite3.Row
        # Takes effect only in a new, empty file (before WAL mode and the first table): a purge can then
        # give its pages back to the file system (``reclaim_space``). Older files need one VACUUM.
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
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
            for stmt in [*ddl("sqlite"), *features_ddl(self.FEATURES)]:
                conn.execute(stmt)
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            self._upgrade_schema(conn, None if row is None else row[0], SCHEMA_VERSION,
                                with_features(MIGRATIONS, self.FEATURES), self.path)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _writer(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is closed")
        return self._conn

    def _nowait_writer(self) -> sqlite3.Connection:
        """The connection of ``record_calls_nowait``: no busy wait (``timeout`` 0: another connection's
        write lock is a refusal) and no automatic checkpoint. Set once on a connection of its own rather
        than toggled around each commit on the writer (four PRAGMAs a call, ~5% of a call's CPU at
        concurrency 1). Under the lock. ``:memory:`` has one connection, and neither waits nor WAL."""
        if self._memory:
            return self._writer()
        if self._nowait is None:
            self._writer()  # raises when closed
            # Not ``_connect``: its ``journal_mode``/``auto_vacuum`` PRAGMAs wait (then fail) while another
            # connection holds the write lock, on the event loop; these three never touch the file's locks.
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._nowait = conn
        return self._nowait

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
                self._close_orphan_readers()
                self._readers.append((threading.current_thread(), conn))
            self._local.conn = conn
        yield conn

    def _close_orphan_readers(self) -> None:
        """Close the readers of threads that have ended (under the lock; nobody else can use them)."""
        live = []
        for thread, conn in self._readers:
            if thread.is_alive():
                live.append((thread, conn))
            else:
                conn.close()
        self._readers = live

    def _in_ids(self, ids: Sequence[str]) -> tuple[str, list[Any]]:
        return f" IN ({', '.join('?' * len(ids))})", list(ids)

    # -- calls ----------------------------------------------------------------------------------------
    def record_calls(self, calls: Sequence[NewCall]) -> list[int]:
        with self._lock:  # held until the cache is updated: the next batch finds this one's sequences
            return super().record_calls(calls)

    def record_calls_nowait(self, calls: Sequence[NewCall]) -> list[int] | None:
        """Commit now if that cannot wait: the store's lock free, no other connection writing (no busy
        wait), no WAL checkpoint in this commit (its fsyncs) and no ``synchronous = FULL`` (an fsync per
        commit). Every ``NOWAIT_CHECKPOINT_EVERY``-th batch is refused, so that the waiting path's commit
        checkpoints the WAL when it has grown. Written on its own connection (``_nowait_writer``)."""
        if not calls:
            return []
        if self._synchronous == "FULL":
            return None
        self._nowait_batches += 1
        if self._nowait_batches % NOWAIT_CHECKPOINT_EVERY == 0:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        try:
            conn = self._nowait_writer()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):  # + extended
                    return None
                raise
            try:
                indices, staged = self._insert_calls(conn, calls)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._keep_staged(staged)
            return indices
        finally:
            self._lock.release()

    # -- housekeeping ---------------------------------------------------------------------------------
    def reclaim_space(self, full: bool = False) -> str:
        """Shrink the file by the pages a purge freed: ``incremental_vacuum`` in a file made with
        ``auto_vacuum = INCREMENTAL`` (every file this version creates); ``full`` runs VACUUM, which also
        converts an older file (it rewrites the whole file and holds the write lock meanwhile)."""
        if self._memory:
            return ""
        with self._lock:
            conn = self._writer()
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            before = int(conn.execute("PRAGMA page_count").fetchone()[0])
            mode = int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])
            if full:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            elif mode == 2:
                conn.executescript("PRAGMA incremental_vacuum;")  # execute() would free one page only
            else:
                free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
                return (f"SQLite: {free * page} bytes freed inside {self.path} are reused by new rows; this file "
                        "predates auto_vacuum, so it does not shrink until `harnessrl purge --yes --vacuum` "
                        "(one VACUUM: rewrites the file, writers wait meanwhile)")  # fmt: skip
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            after = int(conn.execute("PRAGMA page_count").fetchone()[0])
        return f"SQLite: {self.path} shrank by {(before - after) * page} bytes ({before - after} pages)"

    def close(self) -> None:
        with self._lock:
            for _, conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._nowait is not None:
                self._nowait.close()
                self._nowait = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None
