"""Judge calls in the store, on every driver: numbering per rollout, group rows, cache lookup, retention,
and the migration of a version-3 database (before judge calls) to the current version."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from harnessrl.store import NotFound, Store, open_store
from harnessrl.store.judge_calls import JudgeCall
from harnessrl.store.schema import SCHEMA_VERSION
from harnessrl.types import RolloutStatus

from . import schema_v3


def _row(rid: str, call_id: str, position: int, score: float | None = 0.5, *, status: str = "ok",
         key: str = "k1", request: str | None = None) -> JudgeCall:
    return JudgeCall(rid, call_id, position, "group", "judge-model", status, score, f"reason {position}",
                     None if status != "error" else "unparseable", 1, 0.25, key, request,
                     "raw answer" if request else None)


def test_rows_are_numbered_per_rollout_and_read_back(store: Store, new_rollout: Callable[..., str]) -> None:
    a, b = new_rollout(), new_rollout()
    first = store.add_judge_calls([_row(a, "c1", 0, 0.9, request="prompt"), _row(b, "c1", 1, 0.1)])
    assert [(c.rollout_id, c.index) for c in first] == [(a, 0), (b, 0)]
    store.add_judge_calls([_row(a, "c2", 0, None, status="error", key="k2")])
    calls = store.get_judge_calls(a)
    assert [(c.index, c.call_id, c.status, c.score) for c in calls] == [(0, "c1", "ok", 0.9), (1, "c2", "error", None)]
    assert calls[0].request == "prompt" and calls[0].response == "raw answer" and calls[0].created_at > 0
    assert calls[1].error == "unparseable"
    group = store.judge_call_rows("c1")
    assert [(c.position, c.rollout_id, c.score) for c in group] == [(0, a, 0.9), (1, b, 0.1)]
    assert store.get_judge_calls(new_rollout()) == []


def test_cache_lookup_finds_the_newest_answered_judging(store: Store, new_rollout: Callable[..., str]) -> None:
    a, b = new_rollout(), new_rollout()
    assert store.cached_judgement("k1") == []
    store.add_judge_calls([_row(a, "old", 0, 0.2), _row(b, "old", 1, 0.3)])
    time.sleep(0.01)
    store.add_judge_calls([_row(a, "new", 0, 0.7), _row(b, "new", 1, 0.8)])
    store.add_judge_calls([_row(a, "broken", 0, None, status="error")])  # errors are never reused
    assert [(c.call_id, c.position, c.score) for c in store.cached_judgement("k1")] == [("new", 0, 0.7),
                                                                                     ("new", 1, 0.8)]


def test_unknown_rollout_is_refused_and_nothing_is_written(store: Store, new_rollout: Callable[..., str]) -> None:
    a = new_rollout()
    with pytest.raises(NotFound):
        store.add_judge_calls([_row(a, "c1", 0), _row("nope", "c1", 1)])
    assert store.get_judge_calls(a) == []


def test_retention_drops_judge_prompts_but_keeps_scores(store: Store, new_rollout: Callable[..., str]) -> None:
    run = store.create_run("r", {}).id
    rid = new_rollout(run_id=run)
    store.add_judge_calls([_row(rid, "c1", 0, 0.6, request="the transcript, quoted")])
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.transition_rollout(rid, RolloutStatus.SUCCEEDED)
    store.end_run(run)
    store.purge(finished_before=time.time() + 1, dry_run=True)
    assert store.get_judge_calls(rid)[0].request is not None  # a dry run changes nothing
    store.purge(finished_before=time.time() + 1, dry_run=False)
    (call,) = store.get_judge_calls(rid)
    assert (call.request, call.response) == (None, None)
    assert (call.score, call.reason, call.model, call.latency_s) == (0.6, "reason 0", "judge-model", 0.25)


def _fill_v3(conn: object, dialect: schema_v3.Dialect) -> None:
    p = "?" if dialect == "sqlite" else "%s"
    for stmt in schema_v3.ddl(dialect):
        conn.execute(stmt)  # type: ignore[attr-defined]
    conn.execute(f"INSERT INTO schema_version (version) VALUES ({p})", (3,))  # type: ignore[attr-defined]
    conn.execute(  # type: ignore[attr-defined]
        "INSERT INTO rollouts (id, task_id, group_id, input, api_key_hash, status, policy_version, created_at, "
        f"metadata) VALUES ({', '.join([p] * 9)})", ("old", "t", "g", "{}", "h", "running", 0, time.time(), "{}"))


def _check_migrated(url: str) -> None:
    store = open_store(url)
    try:
        assert store.get_rollout("old").status == RolloutStatus.RUNNING
        assert store.get_judge_calls("old") == []
        store.add_judge_calls([_row("old", "c1", 0, 1.0)])
        assert store.cached_judgement("k1")[0].score == 1.0
    finally:
        store.close()


def test_a_version_3_sqlite_database_migrates_to_judge_calls(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    with sqlite3.connect(path) as conn:
        _fill_v3(conn, "sqlite")
        assert "judge_calls" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    _check_migrated(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(6,)]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        # every later step ran too: judge calls (v4), production mode's tables (v5), a response's elided prompt (v6)
        assert {"judge_calls_by_cache", "deployments", "app_keys", "sessions", "feedback",
                "canary_decisions", "sessions_by_window"} <= names
        assert "response_elided" in {r[1] for r in conn.execute("PRAGMA table_info(calls)")}


def test_a_version_3_postgres_database_migrates_to_judge_calls() -> None:
    base = os.environ.get("HARNESSRL_TEST_POSTGRES_URL")
    if not base:
        pytest.skip('no PostgreSQL server: eval "$(bash scripts/postgres.sh)"')
    import psycopg

    schema = f"v3_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(f'SET search_path TO "{schema}"')
            _fill_v3(conn, "postgresql")
        _check_migrated(f"{base}{'&' if '?' in base else '?'}schema={schema}")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            assert conn.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
            tables = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))}
            assert {"judge_calls", "deployments", "app_keys", "sessions", "feedback", "canary_decisions"} <= tables
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
