"""Every reader of a purged rollout says "purged": training samples, export, ``harnessrl show``, dashboard."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from rich.console import Console
from starlette.testclient import TestClient

from harnessrl.export import sample_records
from harnessrl.inspection.terminal import print_rollout
from harnessrl.store import Store
from harnessrl.training.samples import build_samples
from harnessrl.types import RolloutStatus as S
from harnessrl.ui import dashboard_app

from ._helpers import make_call


@pytest.fixture
def purged(store: Store, new_rollout: Callable[..., str]) -> tuple[str, str]:
    """``(purged rollout, kept rollout)`` of one ended run, both finished with three calls and logs."""
    run = store.create_run("r", {}).id
    ids = []
    for _ in range(2):
        rid = new_rollout(run_id=run)
        prompt = [1, 2, 3]
        for t in range(3):
            request = {"messages": [{"role": "user", "content": f"private words {t}"}]}
            store.record_calls([make_call(rid, prompt, [10 + t, 20 + t], request=request)])
            prompt = [*prompt, 10 + t, 20 + t, 30 + t]
        store.transition_rollout(rid, S.RUNNING)
        store.transition_rollout(rid, S.SUCCEEDED, logs="private log line")
        store.add_reward(rid, 1.0)
        ids.append(rid)
    store.end_run(run)
    cutoff = store.get_rollout(ids[0]).finished_at
    assert cutoff is not None
    assert store.purge(finished_before=cutoff + 1e-4, dry_run=False).rollouts == 1
    return ids[0], ids[1]


def test_training_samples_count_purged_calls(store: Store, purged: tuple[str, str]) -> None:
    gone, kept = purged
    built = build_samples(store.get_calls(gone), "g")
    assert built.samples == [] and built.counts["excluded.purged"] == 3
    assert len(build_samples(store.get_calls(kept), "g").samples) == 1


def test_export_skips_purged_rollouts_and_says_so(
    store: Store, purged: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="harnessrl.export"):
        records = list(sample_records(store))
    assert {r["rollout_id"] for r in records} == {purged[1]}
    assert "1 selected rollouts were purged by retention" in caplog.text


def test_show_says_purged(store: Store, purged: tuple[str, str]) -> None:
    console = Console(record=True, width=200)
    print_rollout(store, purged[0], console)
    text = console.export_text()
    assert "retention deleted its calls' text and token arrays and its logs" in text
    assert text.count("not trained: purged by retention") == 3
    assert "private" not in text


def test_dashboard_says_purged(store: Store, purged: tuple[str, str]) -> None:
    gone, kept = purged
    with TestClient(dashboard_app(store, tokenizer="none")) as client:
        page = client.get(f"/rollouts/{gone}")
        assert page.status_code == 200 and 'id="purged"' in page.text and "Purged by retention." in page.text
        assert "private" not in page.text
        call = client.get(f"/rollouts/{gone}/calls/1")
        assert (
            call.status_code == 200
            and 'id="purged"' in call.text
            and "not trained: purged by retention" in call.text
        )
        assert "private" not in call.text
        assert 'id="purged"' not in client.get(f"/rollouts/{kept}").text
        assert "private log line" in client.get(f"/rollouts/{kept}").text


def test_a_purged_rollout_still_counts_its_calls_and_rewards(store: Store, purged: tuple[str, str]) -> None:
    stats = store.rollout_stats(list(purged))
    assert [(s.calls, [w.value for w in s.rewards]) for s in stats.values()] == [(3, [1.0]), (3, [1.0])]
    assert time.time() - (store.get_rollout(purged[0]).purged_at or 0) < 60
