"""Merge/split of recorded calls into samples: prefix kept, broken, retries, branches, errors, overflow."""

from __future__ import annotations

import dataclasses

from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples, common_prefix_length
from harnessrl.types import CallStatus, Fidelity, SampleFidelity

from ._helpers import make_call


def test_prefix_kept_merges_with_context_masked():
    c0 = make_call(0, [1, 2, 3], [4, 5], logprobs=[-0.1, -0.2])
    c1 = make_call(1, [1, 2, 3, 4, 5, 6, 7], [8], logprobs=[-0.3], version=1)
    out = build_samples([c0, c1], "g")
    assert len(out.samples) == 1
    s = out.samples[0]
    assert s.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert s.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert s.behaviour_logprobs == [0, 0, 0, -0.1, -0.2, 0, 0, -0.3]
    assert s.fidelity == SampleFidelity.MERGED and s.fidelity_reason is None
    assert s.call_indices == [0, 1] and s.policy_versions == [0, 1]
    assert s.call_spans == [(3, 5), (7, 8)]
    assert s.rollout_id == "r1" and s.group_id == "g"
    assert out.counts["calls.merged"] == 1 and out.counts["fidelity.merged"] == 1


def test_single_call_is_exact():
    out = build_samples([make_call(0, [9, 9], [1])], "g")
    assert [s.fidelity for s in out.samples] == [SampleFidelity.EXACT]
    assert out.samples[0].loss_mask == [0, 0, 1]


def test_prefix_broken_starts_new_sample_with_reason():
    c0 = make_call(0, [1, 2, 3], [4, 5])
    c1 = make_call(1, [1, 2, 9, 4, 5, 6], [7])  # history edited at token 2
    out = build_samples([c0, c1], "g")
    assert len(out.samples) == 2
    second = out.samples[1]
    assert second.fidelity == SampleFidelity.SPLIT
    assert second.fidelity_reason == "prefix broken at token 2 of 5"
    assert second.token_ids == [1, 2, 9, 4, 5, 6, 7] and second.loss_mask == [0] * 6 + [1]
    assert out.counts["fidelity.split"] == 1 and out.counts["fidelity.exact"] == 1


def test_shorter_prompt_reason_and_retry_branching():
    a = make_call(0, [1, 2], [3])
    b = make_call(1, [1, 2, 3, 4], [5])  # merged: seq = 1 2 3 4 5
    retry = make_call(2, [1, 2, 3, 4], [6])  # same prompt again (client retry): cannot extend 1..5
    cont = make_call(3, [1, 2, 3, 4, 6, 7], [8])  # harness continued from the retry's answer
    out = build_samples([a, b, retry, cont], "g")
    assert len(out.samples) == 2
    first, branch = out.samples
    assert first.token_ids == [1, 2, 3, 4, 5] and first.call_indices == [0, 1]
    assert branch.fidelity_reason == "prompt shorter than previous sequence (4 < 5 tokens)"
    assert branch.token_ids == [1, 2, 3, 4, 6, 7, 8] and branch.call_indices == [2, 3]
    assert branch.loss_mask == [0, 0, 0, 0, 1, 0, 1]


def test_call_extends_older_sample_not_the_last():
    main1 = make_call(0, [1, 2], [3])
    sub = make_call(1, [50, 51], [52])  # a sub-agent with its own conversation
    main2 = make_call(2, [1, 2, 3, 4], [5])  # main agent continues
    sub2 = make_call(3, [50, 51, 52, 53], [54])
    out = build_samples([main1, sub, main2, sub2], "g")
    assert [s.call_indices for s in out.samples] == [[0, 2], [1, 3]]
    assert out.samples[1].fidelity == SampleFidelity.SPLIT  # started fresh, then merged into
    assert out.counts["calls.merged"] == 2


def test_longest_matching_sequence_wins():
    a = make_call(0, [1], [2])  # seq 1 2
    b = make_call(1, [1, 2, 3], [4])  # merged: 1 2 3 4
    c = make_call(2, [1, 2], [9])  # branch: 1 2 9  (shorter prompt)
    d = make_call(3, [1, 2, 3, 4, 5], [6])  # extends the first (longest prefix), not the latest
    out = build_samples([a, b, c, d], "g")
    assert out.samples[0].call_indices == [0, 1, 3]
    assert out.samples[1].call_indices == [2]


def test_errored_cancelled_and_empty_calls_are_excluded_and_counted():
    calls = [
        make_call(0, [1, 2], [3]),
        make_call(1, [1, 2, 3, 4], [5], status=CallStatus.ERROR),
        make_call(2, [1, 2, 3, 4], [], status=CallStatus.OK),
        make_call(3, [1, 2, 3, 4], [6], status=CallStatus.CANCELLED),
        make_call(4, [], [7]),
        make_call(5, [1, 2, 3, 4], [8]),
    ]
    out = build_samples(calls, "g")
    assert out.counts["excluded.status_error"] == 1
    assert out.counts["excluded.status_cancelled"] == 1
    assert out.counts["excluded.no_completion_tokens"] == 1
    assert out.counts["excluded.empty_prompt"] == 1
    assert [s.call_indices for s in out.samples] == [[0, 5]]


def test_no_calls_gives_no_samples():
    out = build_samples([], "g")
    assert out.samples == [] and not out.counts


def test_overflow_truncate_and_drop_are_counted():
    calls = [make_call(0, [1, 2, 3], [4, 5]), make_call(1, [1, 2, 3, 4, 5, 6], [7, 8])]
    trunc = build_samples(calls, "g", SampleConfig(max_sequence_length=6, overflow="truncate"))
    (s,) = trunc.samples
    assert s.token_ids == [1, 2, 3, 4, 5, 6] and s.loss_mask == [0, 0, 0, 1, 1, 0]
    assert s.call_indices == [0] and s.call_spans == [(3, 5)]
    assert trunc.counts["overflow.truncated"] == 1
    dropped = build_samples(calls, "g", SampleConfig(max_sequence_length=6, overflow="drop"))
    assert dropped.samples == [] and dropped.counts["overflow.dropped"] == 1
    nothing_left = build_samples(calls[:1], "g", SampleConfig(max_sequence_length=3))
    assert nothing_left.samples == [] and nothing_left.counts["overflow.dropped"] == 1


def test_extra_choices_trained_only_when_configured():
    call = make_call(0, [1, 2], [3], extra_choices=[[4, 5], [6]])
    first = build_samples([call], "g")
    assert len(first.samples) == 1 and first.counts["excluded.extra_choices"] == 2
    every = build_samples([call], "g", SampleConfig(choices="all"))
    assert [s.token_ids for s in every.samples] == [[1, 2, 3], [1, 2, 4, 5], [1, 2, 6]]
    assert every.samples[1].fidelity_reason == "choice 1 of call 0"
    # the harness continued from choice 2: the next call extends that branch
    nxt = make_call(1, [1, 2, 6, 7], [8])
    cont = build_samples([call, nxt], "g", SampleConfig(choices="all"))
    assert cont.samples[2].call_indices == [0, 1]


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix_length([1, 2, 3], [1, 2]) == 2
    assert common_prefix_length([1, 2, 3], [1, 5, 3]) == 1
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length(list(range(1000)), [*range(777), -1]) == 777


def test_trained_calls_are_counted_by_how_the_gateway_rendered_them():
    calls = [make_call(0, [1, 2], [3]), make_call(1, [1, 2, 3, 4], [5]), make_call(2, [9], [8]),
             make_call(3, [9], [], status=CallStatus.ERROR)]
    # the last call errored: it is excluded from training, so not counted either
    rendered = [Fidelity.EXACT, Fidelity.EXTENDED, Fidelity.RERENDERED, Fidelity.EXACT]
    calls = [dataclasses.replace(c, fidelity=f) for c, f in zip(calls, rendered, strict=True)]
    counts = build_samples(calls, "g").counts
    assert {k: v for k, v in counts.items() if k.startswith("render.")} == {
        "render.exact": 1, "render.extended": 1, "render.rerendered": 1}
