"""The dashboard on a store with 10,000 rollouts: every page is a bounded number of indexed queries.

Each SQL statement the store runs while a page renders is captured and explained; none may scan a
table (``SCAN rollouts`` / ``SCAN calls``), and each page renders under a generous time bound.
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.store.sqlite import SqliteStore
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, RolloutStatus
from harnessrl.ui import dashboard_app

N = 10_000
PAGE_BOUND_S = 1.5  # a page costs ~20-60 ms here; the bound leaves room for a loaded 2-core machine


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, list[str]]:
    path = tmp_path_factory.mktemp("big") / "big.db"
    url = f"sqlite:///{path}"
    store = open_store(url)
    run = store.create_run("big", {"engine": {"model": "tiny"}})
    ids = []
    for i in range(N):
        r = store.create_rollout(task_id=f"task-{i % 97}", input={"i": i}, group_id=f"g{i // 8}", api_key_hash="h",
                                 run_id=run.id, step=i // 100)
        ids.append(r.id)
        if i % 50 == 0:  # some finished rollouts with calls and rewards, spread over the store
            store.transition_rollout(r.id, RolloutStatus.RUNNING)
            store.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {"messages": []}, None, [1, 2, 3],
                                        [ChoiceTokens([4, 5], [-0.1, -0.2])], 0)])
            store.add_reward(r.id, 1.0, "final")
            store.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    store.close()
    return url, run.id, ids


def _plans(statements: list[str], db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        out = []
        for sql in statements:
            if sql.lstrip().upper().startswith(("SELECT", "WITH")):
                out += [f"{row[3]}  <- {sql[:80]}" for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        return out
    finally:
        conn.close()


def test_pages_on_10k_rollouts_use_indexes_and_are_fast(big: tuple[str, str, list[str]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    url, run_id, ids = big
    statements: list[str] = []
    connect = SqliteStore._connect

    def traced(self: SqliteStore) -> sqlite3.Connection:
        conn = connect(self)
        conn.set_trace_callback(statements.append)  # expanded SQL: parameters inlined
        return conn

    monkeypatch.setattr(SqliteStore, "_connect", traced)
    store = open_store(url)
    last_page = (N - 1) // 50
    pages = [
        "/", "/rollouts", f"/rollouts?page={last_page}", f"/runs/{run_id}", f"/runs/{run_id}/live",
        f"/runs/{run_id}?page=150",
        f"/runs/{run_id}?task=task-5", "/rollouts?status=succeeded&page=3", f"/rollouts?step=77&run={run_id}",
        f"/rollouts/{ids[5000]}", f"/rollouts/{ids[5000]}/calls/0", f"/rollouts/{ids[N - 1]}",
    ]
    try:
        with TestClient(dashboard_app(store, store_url=url, tokenizer="none")) as client:
            client.get("/")  # warm-up: imports, templates
            for path in pages:
                statements.clear()
                t0 = time.perf_counter()
                r = client.get(path)
                elapsed = time.perf_counter() - t0
                assert r.status_code == 200, path
                assert elapsed < PAGE_BOUND_S, f"{path} took {elapsed:.2f}s"
                plans = _plans(statements, Path(url.removeprefix("sqlite:///")))
                assert plans, f"{path}: no query captured"
                scans = [p for p in plans if re.match(r"SCAN (rollouts|calls|rewards)\b", p)
                         and "USING" not in p and "COVERING" not in p]
                assert not scans, f"{path}: {scans}"
                assert len(statements) < 20, f"{path}: {len(statements)} statements"
            # the check itself detects a scan
            probe = _plans(["SELECT id FROM rollouts WHERE input = '{}'"], Path(url.removeprefix("sqlite:///")))
            assert any(p.startswith("SCAN rollouts") for p in probe), probe
            last = client.get(f"/rollouts?page={last_page}").text
            assert ids[-1] in last and 'id="next-page"' not in last
            task_rows = re.findall(r'<tr data-rollout="([^"]+)"', client.get(f"/runs/{run_id}?task=task-5").text)
            assert task_rows == [ids[i] for i in range(5, N, 97)][:50]
    finally:
        store.close()
