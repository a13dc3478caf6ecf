"""The engine-mode fidelity verdict (a pure function) on hand-checked examples."""

from hypothesis import given
from hypothesis import strategies as st

from harnessrl.gateway.fidelity import KEEP, PromptHistory, classify_prompt
from harnessrl.types import Fidelity


def test_classify_prompt():
    first = [1, 2, 3, 4, 5]  # prompt + completion of an earlier call
    assert classify_prompt([1, 2], []) == (Fidelity.RERENDERED, "first call of the rollout")
    assert classify_prompt([1, 2, 3, 4, 5], [first]) == (Fidelity.EXACT, None)
    assert classify_prompt((1, 2, 3, 4, 5, 6, 7), [first]) == (Fidelity.EXTENDED, None)
    verdict, reason = classify_prompt([1, 2, 9, 4, 5, 6], [first, [7, 7]])
    assert verdict == Fidelity.RERENDERED  # named against the closest ([1..5]), not the latest ([7, 7])
    assert reason.endswith("closest is the one before the latest (5 tokens), differing at token 2")
    assert classify_prompt([1, 2, 9, 4], [first])[1].endswith("the latest (5 tokens), differing at token 2")
    # any earlier call may be the prefix (the harness went back to an older branch)
    assert classify_prompt([7, 7, 8], [[7, 7], first]) == (Fidelity.EXTENDED, None)
    assert classify_prompt([1, 2, 3], [first])[0] == Fidelity.RERENDERED  # shorter: history was edited


def test_a_side_request_between_two_agent_calls_is_not_the_one_named():
    """Agent call A, a side request S (a commit message: another system prompt), then agent call B.

    B's verdict is made against A (the longest matching prefix), so its reason names A and where B departs
    from A; naming S ("differs at token 1") sent a reader to the wrong call.
    """
    history = PromptHistory()
    a = [1, *range(100, 140)]  # BOS, system prompt, task, A's completion
    s = [1, *range(900, 910)]  # BOS, the side request's own system prompt and answer
    history.append(a, call=0)
    history.append(s, call=1)

    assert history.classify([*a, 7, 8]) == (Fidelity.EXTENDED, None)  # B extends A token for token
    rewritten = [*a[:25], 55, *a[26:], 7, 8]  # B extends A but the harness rewrote token 25 of it
    verdict, reason = history.classify(rewritten)
    assert verdict == Fidelity.RERENDERED
    assert reason == ("no earlier prompt+completion is a prefix: closest is call 0, the one before the latest "
                      "(41 tokens), differing at token 25")


def test_the_closest_is_found_among_all_kept_sequences_and_ties_name_the_latest():
    history = PromptHistory()
    for i, seq in enumerate([[1, 2, 3, 4, 5, 6], [1, 2, 3, 9], [1, 8], [1, 2, 3, 4, 0, 0, 0, 0]]):
        history.append(seq, call=i)
    # shares 5 tokens with call 0 (three before the latest), 4 with call 3, 3 with call 1, 1 with call 2
    assert "closest is call 0, the one 3 before the latest (6 tokens), differing at token 5" in (
        history.classify([1, 2, 3, 4, 5, 7])[1])
    # shares 3 with calls 0, 1 and 3 alike: the latest of them is named
    assert history.classify([1, 2, 3, 7])[1].endswith("call 3, the latest (8 tokens), differing at token 3")
    # a prompt the closest one continues past: it ends where they part
    assert history.classify([1, 2, 3, 4, 5])[1].endswith("call 0, the one 3 before the latest (6 tokens), "
                                                        "differing at token 5")


@given(st.lists(st.lists(st.integers(0, 3), max_size=12), min_size=1, max_size=8),
       st.lists(st.integers(0, 3), max_size=12))
def test_the_named_prefix_is_the_longest_one_kept(seqs, prompt):
    """Against plain lists: the reason's figure is the longest common prefix with any of the last KEEP,
    while those the size cap leaves as digests only are still used for the verdict."""
    history = PromptHistory()
    for seq in seqs:
        history.append(seq)
    verdict, reason = history.classify(prompt)
    kept = seqs[-KEEP:]
    if any(prompt[: len(q)] == q for q in kept):
        assert verdict in (Fidelity.EXACT, Fidelity.EXTENDED) and reason is None
        return
    assert verdict == Fidelity.RERENDERED

    def shared(q: list[int]) -> int:
        return next((i for i, (x, y) in enumerate(zip(prompt, q, strict=False)) if x != y), min(len(prompt), len(q)))

    figure = int(reason.rsplit(" ", 1)[1])
    assert figure <= max(shared(q) for q in kept)
    assert figure >= shared(kept[-1])  # never worse than naming the latest


def test_digests_compare_across_id_widths():
    """Kept sequences are packed as int32 when their ids fit, else int64: a prompt of the other width is
    still matched against each one's digest."""
    history = PromptHistory()
    for seq in ([1 << 40, 5], [1, 2, 3], [9]):
        history.append(seq)
    assert history.classify([1 << 40, 5, 7]) == (Fidelity.EXTENDED, None)  # int64 prompt, int64 kept
    assert history.classify([1, 2, 3, 1 << 40]) == (Fidelity.EXTENDED, None)  # int64 prompt, int32 kept
    assert history.classify([1, 2, 3]) == (Fidelity.EXACT, None)
    assert history.classify([1 << 40, 6])[0] == Fidelity.RERENDERED
