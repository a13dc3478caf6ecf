"""Store queries the dashboard pages rely on: task / failure-kind filters and batched rollout stats."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from harnessrl.store import Store, open_store
from harnessrl.store.schema import SCHEMA_VERSION
from harnessrl.types import FailureKind
from harnessrl.types import RolloutStatus as S

from . import schema_v2
from ._helpers import make_call


def test_task_and_failure_kind_filters(store: Store, new_rollout: Callable[..., str]) -> None:
    run = store.create_run("r", {}).id
    made = {(t, i): new_rollout(run_id=run, task_id=t) for t in ("a", "b") for i in range(3)}
    for key, kind in (((("a", 0)), FailureKind.AGENT), (("b", 1), FailureKind.INFRA), (("b", 2), FailureKind.AGENT)):
        store.transition_rollout(made[key], S.RUNNING)
        store.transition_rollout(made[key], S.FAILED, failure_kind=kind)

    def ids(**kw: object) -> list[str]:
        return [r.id for r in store.list_rollouts(**kw)]  # type: ignore[arg-type]

    assert ids(task_id="a") == [made[("a", i)] for i in range(3)]
    assert ids(run_id=run, task_id="b", limit=1, offset=1) == [made[("b", 1)]]
    assert ids(failure_kind=FailureKind.AGENT) == [made[("a", 0)], made[("b", 2)]]
    assert ids(failure_kind=FailureKind.INFRA, task_id="a") == []
    assert ids(task_id="nope") == []


def test_rollout_stats_counts_calls_and_lists_rewards(store: Store, new_rollout: Callable[..., str]) -> None:
    busy, idle = new_rollout(), new_rollout()
    store.transition_rollout(busy, S.RUNNING)
    store.record_calls([make_call(busy, [1, 2], [3]), make_call(busy, [1, 2, 3, 4], [5])])
    store.record_calls([make_call(busy, [9], [8])])
    store.add_reward(busy, 0.5, "format")
    store.add_reward(busy, 1.0)
    stats = store.rollout_stats([busy, idle, "missing", busy])
    assert set(stats) == {busy, idle}
    assert stats[busy].calls == 3 and stats[idle].calls == 0
    assert [(r.name, r.value) for r in stats[busy].rewards] == [("format", 0.5), ("reward", 1.0)]
    assert stats[idle].rewards == []
    assert store.rollout_stats([]) == {}
    # the batched answer matches the generic fallback of the interface
    assert Store.rollout_stats(store, [busy, idle]) == {k: stats[k] for k in (busy, idle)}


def test_rollout_stats_of_a_long_page(store: Store, new_rollout: Callable[..., str]) -> None:
    """More ids than one statement takes on SQLite (it asks in chunks): rollouts in any chunk are found."""
    busy, idle = new_rollout(), new_rollout()
    store.record_calls([make_call(busy, [1], [2])])
    store.add_reward(idle, 0.25)
    ids = [f"missing-{i}" for i in range(1100)]
    ids[999], ids[1000] = busy, idle  # the last of one chunk and the first of the next
    stats = store.rollout_stats(ids)
    assert set(stats) == {busy, idle}
    assert (stats[busy].calls, stats[busy].rewards) == (1, [])
    assert stats[idle].calls == 0 and [r.value for r in stats[idle].rewards] == [0.25]


def test_version_1_database_gains_the_task_index(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with sqlite3.connect(tmp_path / "old.db") as conn:  # a schema-2 database made to look like schema 1
        for stmt in schema_v2.ddl("sqlite"):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute("DROP INDEX rollouts_by_task")
    open_store(url).close()
    with sqlite3.connect(tmp_path / "old.db") as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "rollouts_by_task" in names
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)


def test_call_usage_sums_calls_tokens_and_latency_and_outlives_a_purge(store: Store,
                                                                      new_rollout: Callable[..., str]) -> None:
    """A run's cost reads its calls' usage in one set query; the figures match the decoded calls, count
    every choice and every status, and stay after retention emptied the token arrays."""
    from dataclasses import replace

    from harnessrl.types import CallStatus

    run = store.create_run("r", {}).id
    a, b, quiet = new_rollout(run_id=run), new_rollout(run_id=run), new_rollout(run_id=run)
    store.record_calls([replace(make_call(a, [1, 2], [3, 4, 5]), latency_s=0.5),
                        replace(make_call(a, [1, 2, 3, 4, 5, 6], [7], [8, 9]), latency_s=0.25)])
    store.record_calls([replace(make_call(b, [9], status=CallStatus.ERROR), latency_s=None)])
    # a refused call, and two whose max_tokens was lowered: one stopped at the limit, one did not
    store.record_calls([replace(make_call(b, [], status=CallStatus.REFUSED), latency_s=None)])
    cut = make_call(quiet, [1], [2, 3])
    cut.choices[0] = replace(cut.choices[0], finish_reason="length")
    store.record_calls([replace(cut, sampling={"max_tokens": 2, "max_tokens_requested": 9,
                                               "max_tokens_clamp": "cap"}, latency_s=None),
                        replace(make_call(quiet, [1, 2, 3, 4], [5]), latency_s=None,
                                sampling={"max_tokens": 2, "max_tokens_requested": 9})])
    usage = store.call_usage([a, b, quiet, "missing", a])
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (6, 2 + 6 + 1 + 1 + 4, 3 + 1 + 2 + 2 + 1)
    assert usage.latency_s == 0.75
    assert (usage.refused, usage.clamped, usage.stopped_at_clamp) == (1, 2, 1)
    assert Store.call_usage(store, [a, b, quiet, "missing"]) == usage  # the generic fallback agrees
    assert store.call_usage([]).calls == 0
    for r in (a, b, quiet):
        store.transition_rollout(r, S.RUNNING)
        store.transition_rollout(r, S.SUCCEEDED)
    store.end_run(run)
    store.purge(finished_before=time.time() + 60, dry_run=False)
    assert store.get_calls(a)[0].prompt_token_ids == []  # purged: the arrays are gone
    assert store.call_usage([a, b, quiet]) == usage
