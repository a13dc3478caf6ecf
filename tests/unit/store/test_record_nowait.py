"""``record_calls_nowait``: commits when it cannot wait, answers ``None`` at once when it would.

The gateway calls it on its event loop (gateway/recorder.py), so every way it could block must be a refusal
instead: another connection writing, the store's lock held by another thread, an fsync per commit
(``synchronous = FULL``), a WAL checkpoint in the commit. A refusal writes nothing."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from harnessrl.store.sqlite import NOWAIT_CHECKPOINT_EVERY, WAL_AUTOCHECKPOINT, SqliteStore

from ._helpers import make_call


def _rollout(store: SqliteStore) -> str:
    return store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id


def test_commits_durably_and_continues_the_rollouts_prefix(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        rid = _rollout(store)
        assert store.record_calls_nowait([make_call(rid, [1, 2, 3], [4, 5])]) == [0]
        assert store.record_calls_nowait([make_call(rid, [1, 2, 3, 4, 5, 6], [7])]) == [1]
        assert store.record_calls_nowait([]) == []
        # its own connection neither waits nor checkpoints; every other write keeps SQLite's defaults
        nowait, writer = store._nowait_writer(), store._writer()
        assert nowait is not writer
        assert nowait.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert nowait.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT
        assert writer.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    with SqliteStore(db) as again:  # committed: a new process reads both, the second one as an extension
        calls = again.get_calls(rid)
        assert [c.index for c in calls] == [0, 1]
        assert [c.prompt_token_ids for c in calls] == [[1, 2, 3], [1, 2, 3, 4, 5, 6]]


def test_refuses_at_once_while_another_connection_writes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        rid = _rollout(store)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        t0 = time.monotonic()
        assert store.record_calls_nowait([make_call(rid, [1], [2])]) is None
        assert time.monotonic() - t0 < 1.0  # not the 30 s busy wait
        other.execute("ROLLBACK")
        other.close()
        assert store.get_calls(rid) == []  # the refusal wrote nothing
        assert store.record_calls([make_call(rid, [1], [2])]) == [0]  # the waiting path still works


def test_refuses_while_another_thread_holds_the_store(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        rid = _rollout(store)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store._lock:
                held.set()
                release.wait(10)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(10)
        try:
            t0 = time.monotonic()
            assert store.record_calls_nowait([make_call(rid, [1], [2])]) is None
            assert time.monotonic() - t0 < 1.0
        finally:
            release.set()
            t.join()
        assert store.record_calls_nowait([make_call(rid, [1], [2])]) == [0]


def test_refuses_with_an_fsync_per_commit_and_once_in_a_while_for_the_checkpoint(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "full.db", synchronous="FULL") as store:
        assert store.record_calls_nowait([make_call(_rollout(store), [1], [2])]) is None
    with SqliteStore(tmp_path / "s.db") as store:
        rid = _rollout(store)
        answers = [store.record_calls_nowait([make_call(rid, [i], [i + 1])]) for i in range(2 * NOWAIT_CHECKPOINT_EVERY)]
        refused = [i for i, a in enumerate(answers) if a is None]
        assert refused == [NOWAIT_CHECKPOINT_EVERY - 1, 2 * NOWAIT_CHECKPOINT_EVERY - 1]
        assert len(store.get_calls(rid)) == 2 * NOWAIT_CHECKPOINT_EVERY - 2


def test_a_failing_batch_is_rolled_back_whole(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        rid = _rollout(store)
        try:
            store.record_calls_nowait([make_call(rid, [1], [2]), make_call("no-such-rollout", [1], [2])])
        except Exception:  # noqa: BLE001 - the store's verdict; what matters is what was written
            pass
        else:
            raise AssertionError("a call of an unknown rollout was accepted")
        assert store.get_calls(rid) == []
        assert not store._nowait_writer().in_transaction
        assert store.record_calls_nowait([make_call(rid, [1], [2])]) == [0]


def test_nowait_and_waiting_writes_interleave_on_one_rollout(tmp_path: Path) -> None:
    """Two connections write one rollout's calls in turn: each continues the other's indices and prefix."""
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        rid = _rollout(store)
        prompt: list[int] = []
        for i in range(6):
            prompt = [*prompt, 10 + i, 20 + i]
            call = make_call(rid, prompt, [30 + i])
            got = store.record_calls_nowait([call]) if i % 2 else store.record_calls([call])
            assert got == [i]
    with SqliteStore(db) as again:
        calls = again.get_calls(rid)
        assert [c.index for c in calls] == list(range(6))
        assert calls[-1].prompt_token_ids == prompt


def test_the_nowait_connection_closes_with_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.record_calls_nowait([make_call(_rollout(store), [1], [2])])
    nowait = store._nowait_writer()
    store.close()
    try:
        nowait.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        pass
    else:
        raise AssertionError("the nowait connection outlived the store")
