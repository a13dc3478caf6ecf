"""What only the PostgreSQL driver has: URL options, schemas, migrations under a lock, reconnection."""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

from harnessrl.store import StoreError, open_store  # noqa: E402
from harnessrl.store import postgres as pg  # noqa: E402
from harnessrl.store.schema import SCHEMA_VERSION  # noqa: E402
from harnessrl.types import FailureKind, RolloutStatus  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit"))  # the store suite's old-database builder
from store._old_db import PROMPTS, fill_v2  # noqa: E402


def _base(url: str) -> str:
    return url.split("?")[0]


def _schema(url: str) -> str:
    return url.split("schema=")[1]


def test_url_options_are_taken_out_and_passwords_never_shown() -> None:
    url = "postgresql://u:s3cret@db.example:5433/hrl?pool_size=3&schema=team_a&sslmode=disable"
    conninfo, options = pg.parse_url(url)
    assert conninfo == "postgresql://u:s3cret@db.example:5433/hrl?sslmode=disable"
    assert options == {"pool_size": "3", "schema": "team_a"}
    assert "s3cret" not in pg.redact_url(url) and "u:***@db.example" in pg.redact_url(url)
    assert pg.redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        pg.parse_url("mysql://u:s3cret@h/db")


def test_unreachable_server_is_a_clear_store_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    with pytest.raises(StoreError, match=f"cannot connect to PostgreSQL at postgresql://u:\\*\\*\\*@127.0.0.1:{port}"):
        pg.PostgresStore(f"postgresql://u:s3cret@127.0.0.1:{port}/db", connect_timeout_s=2)


def test_schema_option_isolates_stores(pg_url: str) -> None:
    other = f"{_base(pg_url)}?schema=other_{uuid.uuid4().hex[:8]}"
    with pg.PostgresStore(pg_url) as a, pg.PostgresStore(other) as b:
        a.create_run("only-in-a", {})
        assert [r.name for r in a.list_runs()] == ["only-in-a"]
        assert b.list_runs() == []
    with psycopg.connect(_base(pg_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{_schema(other)}" CASCADE')


def test_schema_version_recorded_and_newer_database_refused(pg_url: str) -> None:
    open_store(pg_url).close()
    with psycopg.connect(_base(pg_url), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{_schema(pg_url)}"')
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="upgrade harnessrl"):
        open_store(pg_url)


def test_migration_steps_run_once(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    open_store(pg_url).close()
    monkeypatch.setattr(pg, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(pg.MIGRATIONS, SCHEMA_VERSION, ["ALTER TABLE runs ADD COLUMN note TEXT"])
    for _ in range(2):  # the second open finds the new version and runs nothing (ADD COLUMN would fail)
        with pg.PostgresStore(pg_url) as store:
            store.create_run("r", {})
    with psycopg.connect(_base(pg_url), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{_schema(pg_url)}"')
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert conn.execute("SELECT count(note) FROM runs").fetchone() == (0,)


def test_a_version_2_database_opens_migrates_and_purges(pg_url: str) -> None:
    with psycopg.connect(_base(pg_url), autocommit=True) as conn, conn.transaction():
        conn.execute(f'CREATE SCHEMA "{_schema(pg_url)}"')
        conn.execute(f'SET search_path TO "{_schema(pg_url)}"')
        run_id, rid = fill_v2(conn, "postgresql")
    with pg.PostgresStore(pg_url) as store:
        assert [c.prompt_token_ids for c in store.get_calls(rid)] == [list(p) for p in PROMPTS]
        assert store.get_run(run_id).ended_at is None and store.get_rollout(rid).logs == "old logs"
        assert store.purge(finished_before=time.time(), dry_run=False).held_rollouts == 1
        store.end_run(run_id)
        counts = store.purge(finished_before=time.time(), dry_run=False)
        assert (counts.rollouts, counts.calls) == (1, 3)
        assert all(c.purged_at is not None and not c.prompt_token_ids for c in store.get_calls(rid))
        assert "autovacuum" in store.reclaim_space()
    with psycopg.connect(_base(pg_url), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{_schema(pg_url)}"')
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_stores_opened_together_on_an_empty_database(pg_url: str) -> None:
    """Gateways started at once race to create the tables; the advisory lock lets exactly one do it."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        try:
            barrier.wait()
            open_store(pg_url).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_nul_characters_in_logs_are_stored_visibly(pg_url: str) -> None:
    with pg.PostgresStore(pg_url) as store:
        rid = store.create_rollout(task_id="t", input={"x": "a\x00b"}, group_id="g", api_key_hash="h").id
        store.transition_rollout(rid, RolloutStatus.RUNNING)
        r = store.transition_rollout(rid, RolloutStatus.FAILED, failure_kind=FailureKind.AGENT,
                                     error="bad\x00", logs="out\x00put")  # fmt: skip
        assert (r.error, r.logs, r.input) == ("bad\ufffd", "out\ufffdput", {"x": "a\x00b"})


def test_pool_replaces_connections_the_server_dropped(pg_url: str) -> None:
    """After a database restart (or an idle timeout) the next operation gets a live connection."""
    app = f"harnessrl-test-{uuid.uuid4().hex[:8]}"
    with pg.PostgresStore(f"{pg_url}&application_name={app}&pool_size=2") as store:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
        with psycopg.connect(_base(pg_url), autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", (app,)
            ).fetchone()
        assert killed[0] >= 1
        assert store.get_rollout(rid).id == rid
        assert store.transition_rollout(rid, RolloutStatus.RUNNING).status is RolloutStatus.RUNNING
