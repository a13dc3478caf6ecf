"""Retention: ``Store.purge`` empties whole rollouts of ended runs, keeps metadata, and says so (both drivers)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harnessrl.store import Store
from harnessrl.store.retention import PurgeCounts, parse_duration
from harnessrl.types import CallStatus, FailureKind
from harnessrl.types import RolloutStatus as S

from ._helpers import make_call

FUTURE = time.time() + 10 * 86400  # a cutoff every rollout finished before


def _finished_rollout(
    store: Store, new_rollout: Callable[..., str], run_id: str | None, turns: int = 3
) -> str:
    """A rollout with a multi-turn chain (each prompt extends the last: prefix-compressed), logs, a reward."""
    rid = new_rollout(run_id=run_id)
    prompt: list[int] = [1, 2, 3]
    for t in range(turns):
        completion = [100 + t, 200 + t]
        request = {
            "messages": [{"role": "user", "content": f"turn {i} secret-ish text"} for i in range(t + 1)]
        }
        store.record_calls([make_call(rid, prompt, completion, request=request)])
        prompt = [*prompt, *completion, 50 + t]
    store.transition_rollout(rid, S.RUNNING)
    store.transition_rollout(rid, S.SUCCEEDED, logs="harness stdout echoing the prompt\n" * 10)
    store.add_reward(rid, 0.75)
    return rid


def test_purge_empties_text_and_tokens_and_keeps_metadata(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    run = store.create_run("r", {}).id
    rid = _finished_rollout(store, new_rollout, run)
    before = store.get_calls(rid)
    assert store.storage_bytes(rid) > 0
    store.end_run(run)

    dry = store.purge(finished_before=FUTURE)
    assert (dry.runs, dry.rollouts, dry.calls, dry.held_rollouts) == (1, 1, 3, 0)
    assert dry.bytes > 3 * 4 * 3 + len("harness stdout echoing the prompt\n" * 10)
    assert store.get_calls(rid) == before  # a dry run changes nothing

    done = store.purge(finished_before=FUTURE, dry_run=False)
    assert done == dry
    r = store.get_rollout(rid)
    assert r.purged_at is not None and r.logs is None and r.status is S.SUCCEEDED
    after = store.get_calls(rid)
    assert [c.index for c in after] == [0, 1, 2]
    for old, new in zip(before, after, strict=True):
        assert new.purged_at == r.purged_at
        assert (new.request, new.response, new.prompt_token_ids) == ({}, None, [])
        assert [(ch.token_ids, ch.logprobs, ch.finish_reason) for ch in new.choices] == [([], [], "stop")]
        assert (new.status, new.policy_version, new.latency_s, new.created_at, new.api) == (
            old.status, old.policy_version, old.latency_s, old.created_at, old.api)  # fmt: skip
    assert store.get_call(rid, 2) == after[2]  # the single-call read walks the (purged) parent chain
    assert store.storage_bytes(rid) == 0
    assert [w.value for w in store.get_rewards(rid)] == [0.75]
    assert store.rollout_stats([rid])[rid].calls == 3
    assert store.purge(finished_before=FUTURE, dry_run=False) == PurgeCounts()  # nothing left to purge


def test_a_run_that_has_not_ended_keeps_its_calls_whatever_their_age(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    run = store.create_run("r", {}).id
    rid = _finished_rollout(store, new_rollout, run)
    kept = store.get_calls(rid)
    counts = store.purge(finished_before=FUTURE, dry_run=False)
    assert counts == PurgeCounts(held_rollouts=1)
    assert store.get_calls(rid) == kept and store.get_rollout(rid).purged_at is None

    assert store.end_run(run).ended_at is not None
    assert store.end_run(run, ended=False).ended_at is None  # resumed: needs its data again
    assert store.purge(finished_before=FUTURE, dry_run=False).rollouts == 0
    first_end = store.end_run(run).ended_at
    assert store.end_run(run).ended_at == first_end  # ending twice keeps the first time
    assert [r.ended_at for r in store.list_runs()] == [first_end]
    assert store.purge(finished_before=FUTURE, dry_run=False).rollouts == 1


def test_only_finished_rollouts_older_than_the_cutoff_go(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    old = _finished_rollout(store, new_rollout, None)  # no run: finished is enough
    cutoff = time.time()
    time.sleep(0.01)
    young = _finished_rollout(store, new_rollout, None)
    running = new_rollout()
    store.record_calls([make_call(running, [1, 2], [3])])
    store.transition_rollout(running, S.RUNNING)
    failed = new_rollout()
    store.transition_rollout(failed, S.FAILED, failure_kind=FailureKind.INFRA)

    counts = store.purge(finished_before=cutoff, dry_run=False)
    assert (counts.runs, counts.rollouts, counts.calls) == (0, 1, 3)
    assert store.get_rollout(old).purged_at is not None
    assert store.get_rollout(young).purged_at is None and store.get_calls(young)[0].prompt_token_ids == [
        1,
        2,
        3,
    ]
    assert store.get_calls(running)[0].prompt_token_ids == [1, 2]
    # The running rollout keeps recording (its calls were never touched), then finishes and goes too.
    store.record_calls([make_call(running, [1, 2, 3, 4], [5])])
    store.transition_rollout(running, S.SUCCEEDED)
    counts = store.purge(finished_before=FUTURE, dry_run=False)
    assert counts.rollouts == 3  # young, running, and failed (its row had no calls)
    assert all(c.purged_at is not None for c in store.get_calls(running))


def test_run_scope(store: Store, new_rollout: Callable[..., str]) -> None:
    a, b = store.create_run("a", {}).id, store.create_run("b", {}).id
    ra, rb, rn = (_finished_rollout(store, new_rollout, x, turns=1) for x in (a, b, None))
    store.end_run(a)
    store.end_run(b)
    assert store.purge(finished_before=FUTURE, run_ids=[]) == PurgeCounts()
    assert store.purge(finished_before=FUTURE, run_ids=[a], dry_run=False).rollouts == 1
    assert [store.get_rollout(x).purged_at is not None for x in (ra, rb, rn)] == [True, False, False]
    assert store.purge(finished_before=FUTURE, run_ids=[None], dry_run=False).rollouts == 1
    assert [store.get_rollout(x).purged_at is not None for x in (ra, rb, rn)] == [True, False, True]
    assert store.purge(finished_before=FUTURE, run_ids=[b, "no-such-run"], dry_run=False).runs == 1


def test_purge_goes_in_batches_and_leaves_other_rollouts_intact(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    run, live = store.create_run("done", {}).id, store.create_run("live", {}).id
    gone = [_finished_rollout(store, new_rollout, run, turns=2) for _ in range(5)]
    kept = _finished_rollout(store, new_rollout, live, turns=4)
    expected = store.get_calls(kept)
    store.end_run(run)
    counts = store.purge(finished_before=FUTURE, dry_run=False, batch_rollouts=2)
    assert (counts.runs, counts.rollouts, counts.calls, counts.held_rollouts) == (1, 5, 10, 1)
    assert all(store.get_rollout(r).purged_at is not None for r in gone)
    assert store.get_calls(kept) == expected


def test_a_failed_call_is_purged_with_its_rollout(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    store.record_calls([make_call(rid, [1, 2], status=CallStatus.ERROR)])  # no choices at all
    store.transition_rollout(rid, S.CANCELLED)
    assert store.purge(finished_before=FUTURE, dry_run=False).calls == 1
    (call,) = store.get_calls(rid)
    assert call.purged_at is not None and call.choices == [] and call.status is CallStatus.ERROR


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("2w", 14 * 86400), (" 1.5s ", 1.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["30", "d", "30 days", "-1d", ""])
def test_parse_duration_refuses_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="e.g. '30d'"):
        parse_duration(text)
