"""Property: whatever prompts (and requests) a harness sends, the store gives back exactly what it was
given, and it stores no more prompt tokens than the best earlier call leaves unshared."""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessrl.store import Store, rows
from harnessrl.store.base import NewCall

from ._helpers import make_call

tokens = st.lists(st.integers(-(2**31), 2**31 - 1) | st.integers(0, 5), max_size=6)
# Each step: (earlier call to continue from or None, how many of its tokens to keep, new tokens, choices)
steps = st.lists(
    st.tuples(st.none() | st.integers(0, 20), st.integers(0, 30), tokens, st.lists(tokens, max_size=3)),
    min_size=1,
    max_size=12,
)


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, batch=st.integers(1, 4))
def test_prefix_compression_round_trip(
    store: Store, new_rollout: Callable[..., str], plan: list, batch: int
) -> None:
    check_plan(store, new_rollout(), plan, batch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, batch=st.integers(1, 4))
def test_round_trip_with_one_leaf_kept(
    store: Store, new_rollout: Callable[..., str], plan: list, batch: int, monkeypatch
) -> None:
    """The write cache's leaf cap costs compaction only: what reads back is still exactly what was sent."""
    monkeypatch.setattr(rows, "MAX_LEAVES", 1)
    check_plan(store, new_rollout(), plan, batch, optimal=False)


def check_plan(store: Store, rid: str, plan: list, batch: int, optimal: bool = True) -> None:
    """Record the calls ``plan`` describes in batches of ``batch`` and check what reads back; ``optimal``:
    the stored prompt tokens are the fewest any earlier call allows (no leaf dropped by the write cache)."""
    if optimal:
        with mock.patch.object(rows, "MAX_LEAVES", 10**6):
            return _check_plan(store, rid, plan, batch, optimal)
    return _check_plan(store, rid, plan, batch, optimal)


def _check_plan(store: Store, rid: str, plan: list, batch: int, optimal: bool) -> None:
    fulls: list[list[int]] = []  # prompt + choice-0 completion of each call
    sent: list[NewCall] = []
    optimal_prompt_tokens = 0
    for parent, keep, new_tokens, choices in plan:
        base = fulls[parent % len(fulls)][:keep] if fulls and parent is not None else []
        prompt = base + new_tokens
        optimal_prompt_tokens += len(prompt) - max((_shared(prompt, f) for f in fulls), default=0)
        # Requests grow with the prompt too: a message list and a long string that track its tokens.
        request = {
            "model": "m",
            "messages": [{"t": t} for t in prompt],
            "prompt": "x" * 300 + ",".join(map(str, prompt)),
        }
        sent.append(make_call(rid, prompt, *choices, request=request))
        fulls.append(prompt + (choices[0] if choices else []))
    for start in range(0, len(sent), batch):
        assert store.record_calls(sent[start : start + batch]) == list(
            range(start, min(start + batch, len(sent)))
        )

    got = store.get_calls(rid)
    assert [c.prompt_token_ids for c in got] == [c.prompt_token_ids for c in sent]
    assert [c.choices for c in got] == [c.choices for c in sent]
    assert [c.request for c in got] == [c.request for c in sent]
    assert [store.get_call(rid, i) for i in range(len(sent))] == got
    completion_bytes = sum(8 * len(ch.token_ids) for c in sent for ch in c.choices)
    if optimal:
        assert store.storage_bytes(rid) == 4 * optimal_prompt_tokens + completion_bytes
    else:
        assert store.storage_bytes(rid) <= 4 * sum(len(c.prompt_token_ids) for c in sent) + completion_bytes
