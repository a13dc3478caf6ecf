"""Session resolution without a server: the derived id of a conversation, the id rule, and sampling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessrl.gateway.errors import BadRequest
from harnessrl.production.sessions import SESSION_ID, check_session_id, derived_session_id, sampled
from harnessrl.types import ApiKind


def _chat(*turns: str, system: str = "sys") -> dict:
    msgs = [{"role": "system", "content": system}]
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    return {"messages": msgs}


def test_a_conversation_keeps_its_derived_id_as_it_grows() -> None:
    first = derived_session_id(ApiKind.CHAT, _chat("q"), "key_1")
    assert first.startswith("p-") and SESSION_ID.match(first)
    assert derived_session_id(ApiKind.CHAT, _chat("q", "a", "q2", "a2", "q3"), "key_1") == first
    assert derived_session_id(ApiKind.CHAT, _chat("other q"), "key_1") != first
    assert derived_session_id(ApiKind.CHAT, _chat("q", system="other"), "key_1") != first
    assert derived_session_id(ApiKind.CHAT, _chat("q"), "key_2") != first  # per app key


def test_each_api_reads_its_own_opening() -> None:
    anth = {"system": "sys", "messages": [{"role": "user", "content": "q"}]}
    grown = {"system": "sys", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                           {"role": "user", "content": "q2"}]}
    assert derived_session_id(ApiKind.ANTHROPIC_MESSAGES, anth, "k") == \
        derived_session_id(ApiKind.ANTHROPIC_MESSAGES, grown, "k")
    resp = {"instructions": "sys", "input": "q"}
    resp_grown = {"instructions": "sys", "input": [{"role": "user", "content": "q"},
                                                   {"type": "function_call_output", "output": "x"}]}
    assert derived_session_id(ApiKind.RESPONSES, resp, "k") == derived_session_id(ApiKind.RESPONSES, resp_grown, "k")
    assert derived_session_id(ApiKind.COMPLETIONS, {"prompt": "a"}, "k") != \
        derived_session_id(ApiKind.COMPLETIONS, {"prompt": "ab"}, "k")  # a completions prompt is its own opening
    assert derived_session_id(ApiKind.CHAT, "not an object", "k").startswith("p-")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "a/b", "é", "a\nb"])
def test_bad_ids_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(BadRequest, match="1-128 characters"):
        check_session_id(bad, "the X-Session-Id header")


def test_good_ids_pass() -> None:
    for good in ("a", "x" * 128, "user-1:conv.2_3", "p-0123abcd.1"):
        assert check_session_id(good, "test") == good


@given(st.text(alphabet="abcdef0123456789", min_size=1, max_size=20), st.floats(0.0, 1.0))
def test_sampling_is_decided_by_the_id_alone(session_id: str, fraction: float) -> None:
    assert sampled("dep", session_id, fraction) == sampled("dep", session_id, fraction)
    assert sampled("dep", session_id, 1.0) and not sampled("dep", session_id, 0.0)
    if sampled("dep", session_id, fraction):  # a larger fraction records a superset
        assert sampled("dep", session_id, min(1.0, fraction + 0.1))


def test_sampling_records_about_the_fraction() -> None:
    ids = [f"session-{i}" for i in range(4000)]
    for fraction in (0.1, 0.5, 0.9):
        share = sum(sampled("dep", s, fraction) for s in ids) / len(ids)
        assert abs(share - fraction) < 0.03, (fraction, share)
