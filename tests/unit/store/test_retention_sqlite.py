"""Retention on SQLite: a version-2 file opens and migrates; a purge gives its pages back to the disk."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from harnessrl.store import open_store
from harnessrl.store.schema import SCHEMA_VERSION
from harnessrl.store.sqlite import SqliteStore
from harnessrl.types import RolloutStatus as S

from ._helpers import make_call
from ._old_db import PROMPTS, fill_v2


def _file_bytes(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def test_a_version_2_database_opens_migrates_and_purges(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with sqlite3.connect(path) as conn:
        run_id, rid = fill_v2(conn, "sqlite")
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.get_run(run_id).ended_at is None
        r = store.get_rollout(rid)
        assert r.purged_at is None and r.logs == "old logs"
        calls = store.get_calls(rid)
        assert [c.prompt_token_ids for c in calls] == [list(p) for p in PROMPTS]
        assert all(c.purged_at is None for c in calls)
        assert store.purge(finished_before=time.time(), dry_run=False).held_rollouts == 1
        store.end_run(run_id)
        counts = store.purge(finished_before=time.time(), dry_run=False)
        assert (counts.rollouts, counts.calls) == (1, 3)
        assert all(c.purged_at is not None and not c.prompt_token_ids for c in store.get_calls(rid))
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def _fill(store: SqliteStore, rollouts: int, tokens: int) -> str:
    run = store.create_run("big", {}).id
    for i in range(rollouts):
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run).id
        store.record_calls(
            [make_call(rid, list(range(i, i + tokens)), list(range(tokens)), request={"x": "y" * 4000})]
        )
        store.transition_rollout(rid, S.RUNNING)
        store.transition_rollout(rid, S.SUCCEEDED)
    store.end_run(run)
    return run


def test_a_purge_shrinks_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = SqliteStore(path)
    try:
        assert store._writer().execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        _fill(store, rollouts=40, tokens=5000)
        store.reclaim_space()  # checkpoint: measure the file, not the WAL
        before = _file_bytes(path)
        counts = store.purge(finished_before=time.time() + 1, dry_run=False)
        assert counts.rollouts == 40 and counts.bytes > 40 * 5000 * 12
        message = store.reclaim_space()
        after = _file_bytes(path)
        assert "shrank" in message
        assert before - after > 0.9 * 40 * 5000 * 12, (before, after, message)
    finally:
        store.close()


def test_an_older_file_shrinks_after_one_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        fill_v2(conn, "sqlite")  # auto_vacuum = NONE, as every file before this version
    store = SqliteStore(path)
    try:
        _fill(store, rollouts=20, tokens=5000)
        store.purge(finished_before=time.time() + 1, dry_run=False)
        assert "--vacuum" in store.reclaim_space()
        before = _file_bytes(path)
        assert "shrank" in store.reclaim_space(full=True)
        assert before - _file_bytes(path) > 0.9 * 20 * 5000 * 12
        assert store._writer().execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # converted for next time
    finally:
        store.close()
