"""Calls: round trip, per-rollout indices, prefix compression, linear storage, closed rollouts, rewards."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from harnessrl.store import NotFound, RolloutClosed, Store, open_store
from harnessrl.types import ApiKind, CallStatus, FailureKind, Fidelity, RolloutStatus

from ._helpers import make_call

S = RolloutStatus
TOKEN = 4  # bytes per stored token id or logprob


def _check_round_trip(store: Store, rid: str, sent: list) -> None:
    got = store.get_calls(rid)
    assert [c.index for c in got] == list(range(len(sent)))
    for call, new in zip(got, sent, strict=True):
        assert call.prompt_token_ids == new.prompt_token_ids
        assert call.choices == new.choices
        assert store.get_call(rid, call.index) == call


def test_every_field_round_trips(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    new = make_call(rid, [1, 2, 3], [4, 5], [6], request={"model": "gpt-4o", "tools": [{"type": "function"}]})
    new.api, new.requested_model, new.sampling = ApiKind.COMPLETIONS, "gpt-4o", {"temperature": 0.7}
    new.engine_id, new.latency_s, new.policy_version = "engine-1", 0.25, 4
    new.fidelity, new.fidelity_reason = Fidelity.RERENDERED, "first call"
    assert store.record_calls([new]) == [0]
    call = store.get_call(rid, 0)
    assert (call.rollout_id, call.index, call.api, call.status) == (
        rid,
        0,
        ApiKind.COMPLETIONS,
        CallStatus.OK,
    )
    assert call.request == new.request and call.response == new.response
    assert (call.requested_model, call.sampling, call.engine_id) == (
        "gpt-4o",
        {"temperature": 0.7},
        "engine-1",
    )
    assert (call.latency_s, call.policy_version, call.error) == (0.25, 4, None)
    assert (call.fidelity, call.fidelity_reason) == (Fidelity.RERENDERED, "first call")
    assert call.prompt_token_ids == [1, 2, 3] and call.completion_token_ids == [4, 5]
    assert call.completion_logprobs == [0.0, -0.5] and call.choices[1].token_ids == [6]
    assert call.choices[0].finish_reason == "stop" and call.created_at > 0
    assert store.get_calls(rid) == [call]


def test_logprobs_are_float32(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    new = make_call(rid, [1], [2, 3])
    new.choices[0].logprobs[:] = [-0.1234567891, -12.5]
    store.record_calls([new])
    assert store.get_call(rid, 0).completion_logprobs == pytest.approx([-0.1234567891, -12.5], rel=1e-7)


def test_error_call_and_missing_logprobs(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    failed = make_call(rid, [], status=CallStatus.ERROR)
    failed.response, failed.error = None, "engine down"
    no_lp = make_call(rid, [1, 2], [3, 4])
    no_lp.choices[0].logprobs.clear()
    store.record_calls([failed, no_lp])
    a, b = store.get_calls(rid)
    assert (a.status, a.response, a.error, a.prompt_token_ids, a.choices) == (
        CallStatus.ERROR,
        None,
        "engine down",
        [],
        [],
    )
    assert b.completion_token_ids == [3, 4] and b.completion_logprobs == []


def test_indices_are_per_rollout_and_batches_mix_rollouts(
    store: Store, new_rollout: Callable[..., str]
) -> None:
    r1, r2 = new_rollout(), new_rollout()
    assert store.record_calls(
        [make_call(r1, [1], [2]), make_call(r2, [1], [2]), make_call(r1, [1, 2, 3], [4])]
    ) == [0, 0, 1]
    assert store.record_calls([make_call(r2, [5], [6])]) == [1]
    assert store.record_calls([]) == []
    assert [c.prompt_token_ids for c in store.get_calls(r1)] == [[1], [1, 2, 3]]
    assert [c.prompt_token_ids for c in store.get_calls(r2)] == [[1], [5]]


def test_calls_on_queued_rollout_are_allowed(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()  # the harness may call before the runner reports it running
    assert store.record_calls([make_call(rid, [1], [2])]) == [0]
    store.transition_rollout(rid, S.RUNNING)
    assert store.record_calls([make_call(rid, [1, 2, 3], [4])]) == [1]


@pytest.mark.parametrize("final", [S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED])
def test_terminal_rollout_refuses_calls_whole_batch(
    store: Store, new_rollout: Callable[..., str], final: S
) -> None:
    closed, open_ = new_rollout(), new_rollout()
    store.record_calls([make_call(closed, [1], [2]), make_call(open_, [1], [2])])
    store.transition_rollout(closed, S.RUNNING)
    kind = FailureKind.AGENT if final in (S.FAILED, S.TIMED_OUT) else None
    store.transition_rollout(closed, final, failure_kind=kind)
    with pytest.raises(RolloutClosed, match=str(final)):
        store.record_calls([make_call(open_, [1, 2, 3], [4]), make_call(closed, [1, 2, 5], [6])])
    # All or nothing: the open rollout's call of the failed batch was not written either...
    assert len(store.get_calls(open_)) == 1 and len(store.get_calls(closed)) == 1
    # ...and retrying it alone gets the next index and compresses against the right parent.
    before = store.storage_bytes(open_)
    assert store.record_calls([make_call(open_, [1, 2, 3], [4])]) == [1]
    assert store.get_call(open_, 1).prompt_token_ids == [1, 2, 3]
    assert store.storage_bytes(open_) - before == TOKEN * (1 + 2)  # suffix [3], completion [4] + logprob


def test_unknown_rollout_and_call(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    with pytest.raises(NotFound):
        store.record_calls([make_call(rid, [1], [2]), make_call("missing", [1], [2])])
    assert store.get_calls(rid) == []
    with pytest.raises(NotFound):
        store.get_call(rid, 0)
    store.record_calls([make_call(rid, [1], [2])])
    with pytest.raises(NotFound):
        store.get_call(rid, 1)
    with pytest.raises(NotFound):
        store.storage_bytes("missing")


# -- prefix compression -----------------------------------------------------------------------------------


def test_extending_prompts_store_only_new_tokens(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    cases = [
        # (prompt, choices, prompt tokens expected to be stored)
        ([1, 2, 3, 4], [[5, 6]], 4),  # first call: everything
        ([1, 2, 3, 4, 5, 6, 7, 8], [[9]], 2),  # extends call 0's prompt + completion
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [[]], 1),  # extends call 1
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [[12, 13], [14]], 1),  # extends call 2 (empty completion)
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15], [[16]], 2),  # n>1: only choice 0 is a parent sequence
        ([1, 2, 3, 4, 5, 6, 99], [[7]], 1),  # branches off an older call (harness rewound history)
        ([1, 2, 3, 4, 5, 6, 99, 7, 100], [[]], 1),  # extends the branch
        ([50, 51, 52], [[53]], 3),  # unrelated prompt: stored whole
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 77], [[]], 1),  # back to the main line
        ([1, 2], [[3]], 0),  # a prefix of an earlier prompt
        ([], [[1]], 0),
    ]
    sent = []
    for prompt, choices, stored in cases:
        new = make_call(rid, prompt, *choices)
        before = store.storage_bytes(rid)
        store.record_calls([new])
        completion = sum(TOKEN * 2 * len(c) for c in choices)
        assert store.storage_bytes(rid) - before - completion == TOKEN * stored, prompt
        sent.append(new)
    _check_round_trip(store, rid, sent)


def test_compression_survives_reopen(store_url: str, new_rollout: Callable[..., str], store: Store) -> None:
    rid = new_rollout()
    sent = [make_call(rid, [1, 2], [3]), make_call(rid, [1, 2, 3, 4], [5])]
    store.record_calls(sent)
    store.close()
    again = open_store(store_url)
    try:
        before = again.storage_bytes(rid)
        sent.append(make_call(rid, [1, 2, 3, 4, 5, 6], [7]))
        assert again.record_calls(sent[-1:]) == [2]
        assert again.storage_bytes(rid) - before == TOKEN * (1 + 2)
        _check_round_trip(again, rid, sent)
    finally:
        again.close()


def test_thirty_turns_grow_linearly(store: Store, new_rollout: Callable[..., str]) -> None:
    """A chat where every turn resends the whole history: stored bytes per turn must stay constant.

    Turn t sends the history (system prompt + t * (user 50 + reply 20 tokens)). Stored naively that is
    quadratic (~30x more for 30 turns than for 1); compressed, each turn adds exactly its new tokens.
    """
    rid = new_rollout()
    system, user, reply = 500, 50, 20
    history = list(range(system))
    sizes = []
    for turn in range(30):
        history = history + [1000 + turn * 100 + i for i in range(user)]
        completion = [5000 + turn * 100 + i for i in range(reply)]
        store.record_calls([make_call(rid, history, completion)])
        history = history + completion
        sizes.append(store.storage_bytes(rid))
    per_turn = TOKEN * (user + 2 * reply)  # new prompt tokens + completion ids + logprobs
    assert sizes[0] == TOKEN * (system + user + 2 * reply)
    assert all(b - a == per_turn for a, b in zip(sizes, sizes[1:], strict=False))
    assert sizes[29] < 3 * sizes[9]  # linear in turns (quadratic storage gives > 5x here)
    assert store.get_call(rid, 29).prompt_token_ids == history[:-reply]


def test_growing_requests_round_trip(store: Store, new_rollout: Callable[..., str]) -> None:
    """Requests resend the history; however the store shares it between calls, each reads back whole."""
    rid = new_rollout()
    system = {"role": "system", "content": "be brief"}
    msgs = [system, {"role": "user", "content": "q0"}]
    requests = [
        {"model": "gpt-4o", "messages": msgs, "tools": [{"type": "function", "name": "ls"}]},
        {
            "model": "gpt-4o",
            "messages": [*msgs, {"role": "assistant", "content": "a0"}, {"role": "user", "content": "q1"}],
        },
        {"model": "gpt-4o", "messages": [*msgs, {"role": "user", "content": "rewound"}]},  # branch
        {
            "model": "other",
            "messages": [{"role": "system", "content": "new"}],
            "prompt": "p" * 400,
        },  # unrelated
        {"model": "other", "messages": [], "prompt": "p" * 400 + "more"},  # string extended
        {"model": "other", "messages": [], "prompt": "p" * 10},  # string shortened
        {"messages": None},
        {"messages": [{"n": 1}, {"n": True}, [1]]},
        {"messages": [{"n": 1.0}, {"n": 1}, [True], {"n": 2}]},  # equal in Python, not in JSON
    ]
    prompts = [
        [1, 2],
        [1, 2, 3, 4],
        [1, 2, 3, 9],
        [7],
        [7, 8, 8],
        [7, 8],
        [7, 8, 5],
        [7, 8, 5, 6],
        [7, 8, 5, 6, 7, 8],
    ]
    sent = [make_call(rid, p, [p[-1] + 1], request=r) for p, r in zip(prompts, requests, strict=True)]
    store.record_calls(sent[:3])
    store.record_calls(sent[3:])
    for got in (store.get_calls(rid), [store.get_call(rid, i) for i in range(len(requests))]):
        assert [orjson.dumps(c.request) for c in got] == [orjson.dumps(r) for r in requests]


# -- rewards ------------------------------------------------------------------------------------------------


def test_rewards(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    store.record_calls([make_call(rid, [1], [2]), make_call(rid, [1, 2, 3], [4])])
    store.transition_rollout(rid, S.RUNNING)
    first = store.add_reward(rid, 1.0)
    store.transition_rollout(rid, S.SUCCEEDED)  # verifiers run after the harness exits
    second = store.add_reward(rid, -0.5, name="format", call_index=1)
    assert store.get_rewards(rid) == [first, second]
    assert (second.value, second.name, second.call_index) == (-0.5, "format", 1)
    with pytest.raises(NotFound):
        store.add_reward(rid, 1.0, call_index=2)
    with pytest.raises(NotFound):
        store.add_reward("missing", 1.0)
    with pytest.raises(ValueError, match="finite"):
        store.add_reward(rid, float("nan"))
    assert store.get_rewards(rid) == [first, second]
    other = new_rollout()
    assert store.get_rewards(other) == []


@pytest.mark.parametrize("final", [S.FAILED, S.TIMED_OUT])
def test_rewards_after_failure_are_kept(store: Store, new_rollout: Callable[..., str], final: S) -> None:
    """Scoring writes a failed attempt's rewards after it closed: they must be in the store, read back."""
    rid = new_rollout()
    store.transition_rollout(rid, S.RUNNING)
    store.transition_rollout(rid, final, failure_kind=FailureKind.AGENT)
    store.add_reward(rid, 0.25, name="verifier")
    store.add_reward(rid, 0.0, name="final")
    assert [(w.name, w.value) for w in store.get_rewards(rid)] == [("verifier", 0.25), ("final", 0.0)]


def test_cancelled_rollout_refuses_rewards(store: Store, new_rollout: Callable[..., str]) -> None:
    rid = new_rollout()
    store.transition_rollout(rid, S.CANCELLED)
    with pytest.raises(RolloutClosed):
        store.add_reward(rid, 1.0)
    assert store.get_rewards(rid) == []
