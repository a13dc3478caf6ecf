"""What only the SQLite driver has: WAL, synchronous modes, query plans, schema versions, ``:memory:``."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.store import StoreError, open_store
from harnessrl.store.schema import SCHEMA_VERSION
from harnessrl.store.sqlite import SqliteStore
from harnessrl.types import RolloutStatus

from ._helpers import make_call
from .test_prefix_property import check_plan, steps


def _pragma(store: SqliteStore, name: str) -> object:
    return store._writer().execute(f"PRAGMA {name}").fetchone()[0]


def test_wal_and_synchronous(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "a.db") as store:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "synchronous") == 1  # NORMAL
        assert _pragma(store, "foreign_keys") == 1
    with SqliteStore.from_url(f"sqlite:///{tmp_path}/b.db?synchronous=full") as store:
        assert _pragma(store, "synchronous") == 2  # FULL
    with pytest.raises(ValueError, match="unknown sqlite store options"):
        SqliteStore.from_url(f"sqlite:///{tmp_path}/c.db?fsync=1")
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(tmp_path / "d.db", synchronous="OFF")  # type: ignore[arg-type]


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///sub/rel.db")
    store.close()
    assert (tmp_path / "sub" / "rel.db").exists()
    with SqliteStore.from_url("sqlite:///:memory:") as mem:
        assert mem.path == ":memory:"


@pytest.mark.parametrize(
    "filters",
    [dict(zip(("run_id", "status", "step"), v, strict=True)) for v in itertools.product((None, 1), repeat=3)],
)
def test_listing_rollouts_never_scans_the_table(tmp_path: Path, filters: dict) -> None:
    with SqliteStore(tmp_path / "a.db") as store:
        where = " AND ".join(f"{k} = ?" for k, v in filters.items() if v is not None)
        sql = (
            "SELECT * FROM rollouts"
            + (f" WHERE {where}" if where else "")
            + " ORDER BY created_at, id LIMIT 5"
        )
        args = [v for v in filters.values() if v is not None]
        plan = " | ".join(row[3] for row in store._writer().execute("EXPLAIN QUERY PLAN " + sql, args))
        # A filter searches an index; no filter walks the created_at index and stops at LIMIT.
        assert plan.startswith("SEARCH rollouts USING INDEX" if args else "SCAN rollouts USING INDEX"), plan
        assert "TEMP B-TREE" not in plan, plan  # already in created_at order: no sort of all matches


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "a.db").close()
    with sqlite3.connect(tmp_path / "a.db") as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="upgrade harnessrl"):
        SqliteStore(tmp_path / "a.db")


def test_memory_store_shares_one_connection_across_threads() -> None:
    with SqliteStore(":memory:") as store:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
        seen: list[int] = []
        th = threading.Thread(target=lambda: seen.extend(store.record_calls([make_call(rid, [1], [2])])))
        th.start()
        th.join()
        assert seen == [0] and store.get_call(rid, 0).prompt_token_ids == [1]


def test_readers_of_ended_threads_are_closed(tmp_path: Path) -> None:
    """Each thread reads on its own connection; one whose thread has ended is closed when the next opens,
    so a pool that retires idle threads (anyio's) does not pile up connections and their file handles."""
    with SqliteStore(tmp_path / "a.db") as store:
        run = store.create_run("r", {}).id
        seen: list[sqlite3.Connection] = []

        def read() -> None:
            assert store.get_run(run).id == run
            seen.append(store._local.conn)

        for _ in range(20):
            t = threading.Thread(target=read)
            t.start()
            t.join()
        read()  # this (live) thread's reader
        assert len(store._readers) <= 2
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            seen[0].execute("SELECT 1")
        assert seen[-1].execute("SELECT 1").fetchone()[0] == 1  # the live thread's reader stays open
        assert store.get_run(run).id == run


def test_tiny_cache_still_compresses_and_indexes(tmp_path: Path) -> None:
    """With the LRU evicting everything, every batch rebuilds from the database, with the same result."""
    with SqliteStore(tmp_path / "a.db", cache_bytes=0) as store:
        rids = [
            store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id for _ in range(2)
        ]
        prompts = {rid: [1, 2, 3] for rid in rids}
        for turn in range(5):
            for rid in rids:
                assert store.record_calls([make_call(rid, prompts[rid], [turn])]) == [turn]
                prompts[rid] = prompts[rid] + [turn, 9]
        for rid in rids:
            assert store.storage_bytes(rid) == 4 * (3 + 4 * 1) + 5 * 8
            assert store.get_call(rid, 4).prompt_token_ids == [1, 2, 3, 0, 9, 1, 9, 2, 9, 3, 9]


@settings(max_examples=30, deadline=None)
@given(plan=steps, batch=st.integers(1, 3))
def test_prefix_compression_without_cache(plan: list, batch: int) -> None:
    """The cache-miss path (rebuilding a rollout's sequences from its rows) on every batch."""
    with SqliteStore(":memory:", cache_bytes=0) as store:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
        check_plan(store, rid, plan, batch)


def test_cache_is_dropped_when_rollout_ends_and_closed_store_refuses(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    store.record_calls([make_call(rid, [1], [2])])
    assert store._cache.get(rid) is not None
    store.transition_rollout(rid, RolloutStatus.CANCELLED)
    assert store._cache.get(rid) is None
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get_rollout(rid)


def test_request_documents_grow_linearly(tmp_path: Path) -> None:
    """A 30-turn chat resends its history each turn; the stored request JSON must not grow with it."""
    with SqliteStore(tmp_path / "a.db") as store:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
        messages: list[dict] = [{"role": "system", "content": "s" * 2000}]
        prompt: list[int] = list(range(500))
        sizes = []
        for turn in range(30):
            messages = [*messages, {"role": "user", "content": f"question {turn} " + "u" * 200}]
            prompt = prompt + [1000 + turn] * 50
            store.record_calls(
                [make_call(rid, prompt, [turn] * 20, request={"model": "m", "messages": messages})]
            )
            messages = [*messages, {"role": "assistant", "content": "a" * 80}]
            prompt = prompt + [turn] * 20
            (size,) = store._writer().execute("SELECT SUM(LENGTH(request)) FROM calls").fetchone()
            sizes.append(size)
        steps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
        assert max(steps) - min(steps) <= 10  # constant per turn (digits aside), not growing with history
        assert sizes[29] < 3 * sizes[9]  # whole requests: ~6x
        assert store.get_calls(rid)[29].request["messages"] == messages[:-1]
