"""What an open rollout keeps in the gateway's memory is bounded in bytes, not only in counts: the fidelity
check keeps one packed sequence and a few digests; the Responses API keeps its last few conversations
and reads older ones back from the store when a harness continues one."""

from __future__ import annotations

import openai
import pytest

from harnessrl.gateway.apis.responses import KEEP_CONVERSATIONS
from harnessrl.gateway.fidelity import KEEP, PromptHistory
from harnessrl.types import Fidelity


def test_fidelity_state_stays_one_context_after_many_calls():
    history = PromptHistory()
    seq: list[int] = []
    for turn in range(500):  # a long rollout: 500 calls, its context growing to 10,000 tokens
        seq = (seq + list(range(100_000 + turn, 100_020 + turn)))[-10_000:]
        history.append(seq)
    assert len(history) == KEEP
    assert history.nbytes() <= 4 * len(seq) + 16 * (KEEP - 1)  # was 4 lists of Python ints: 8+ bytes/token


def test_fidelity_checks_each_kept_sequence():
    history = PromptHistory()
    seqs = [[1, 2, 3], [9, 9], [5, 6, 7, 8], [4, 4, 4], [1 << 40, 2]]
    for s in seqs:
        history.append(s)
    assert history.classify([1 << 40, 2]) == (Fidelity.EXACT, None)  # the latest, int64 ids
    assert history.classify([5, 6, 7, 8, 0]) == (Fidelity.EXTENDED, None)  # an older one: by digest
    assert history.classify([9, 9]) == (Fidelity.EXACT, None)
    verdict, reason = history.classify([1, 2, 3, 4])  # the oldest fell out of the last KEEP
    assert verdict == Fidelity.RERENDERED and reason.endswith("differing at token 0")
    assert history.classify([1 << 40, 3])[1].endswith("the latest (2 tokens), differing at token 1")


def test_fidelity_state_with_side_requests_and_rewritten_histories():
    """Side requests between agent calls cost their own tokens; a history rewritten every call, two contexts."""
    history = PromptHistory()
    agent: list[int] = []
    for turn in range(200):  # an agent call, then a short side request (a commit message) after each
        agent = agent + list(range(200_000 + 20 * turn, 200_020 + 20 * turn))
        history.append(agent)
        history.append([1, *range(50 + turn % 7, 80)])
    assert history.nbytes() <= 4 * len(agent) + 4 * 3 * 30 + 16 * (KEEP - 1)
    verdict, reason = history.classify([*agent[:100], 5, *agent[101:]])
    assert verdict == Fidelity.RERENDERED
    assert reason.endswith("the one before the latest (4000 tokens), differing at token 100")

    history.clear()
    window = list(range(10_000))
    for turn in range(50):  # the harness drops its oldest turn every call: no two calls share a prefix
        window = window[20:] + list(range(10_000 + 20 * turn, 10_020 + 20 * turn))
        history.append(window)
    assert history.nbytes() <= 2 * 4 * len(window) + 16 * (KEEP - 1)


def test_responses_older_than_those_kept_are_read_back_from_the_store(gw):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    first = c.responses.create(model="m", input="first question", max_output_tokens=8)
    prev = first
    for i in range(2 * KEEP_CONVERSATIONS):
        prev = c.responses.create(model="m", input=f"follow-up {i}", previous_response_id=prev.id,
                                  max_output_tokens=8)
    state = gw.gateway.registry._states[r.id]
    assert len(state.responses) == KEEP_CONVERSATIONS and first.id not in state.responses
    assert all(isinstance(v, bytes) for v in state.responses.values())  # JSON, a third of the objects

    branch = c.responses.create(model="m", input="another branch", previous_response_id=first.id,
                                max_output_tokens=8)
    calls = gw.store.get_calls(r.id)
    served = gw.engine.requests[-1]["messages"]
    assert [m["content"] for m in served] == ["first question", first.output_text, "another branch"]
    assert calls[-1].response["id"] == branch.id
    # a chain continued past the kept ones also reads back whole
    c.responses.create(model="m", input="again", previous_response_id=calls[2].response["id"], max_output_tokens=8)
    assert len(gw.engine.requests[-1]["messages"]) == 2 * 3 + 1
    try:
        c.responses.create(model="m", input="x", previous_response_id="resp_not_this_rollouts")
    except openai.BadRequestError as exc:
        assert "previous_response_id" in str(exc)
    else:
        raise AssertionError("an unknown previous_response_id was accepted")


def _rendered_rollout(make_gateway):
    """A gateway in render mode with one rollout that made one call: (gateway, rollout, client, histories)."""
    pytest.importorskip("transformers")
    from harnessrl.gateway.render import RenderConfig

    gw = make_gateway(render_mode="gateway", render=RenderConfig(tokenizer="tiny"))
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hello"}], max_tokens=4)
    return gw, r, c, gw.gateway.calls.s.renderer._histories


def test_a_closed_rollouts_render_history_is_dropped(make_gateway):
    """Gateway render mode keeps each rollout's token history; closing the rollout must free it (it did not:
    ``Renderer.forget`` had no caller, so every finished rollout's history stayed)."""
    gw, r, _, histories = _rendered_rollout(make_gateway)
    assert r.id in histories
    for status in ("running", "succeeded"):
        assert gw.admin.post(f"/admin/rollouts/{r.id}/status", json={"status": status}).status_code == 200
    assert r.id not in histories


def test_a_rollout_closed_in_the_store_is_forgotten_when_its_controller_says_so(make_gateway):
    """The controller closes rollouts in the store, not through the gateway; ``POST .../closed`` then drops
    the gateway's history of it (the render history stayed for the whole run before) and refuses its calls.
    A rollout the store still has open is not closed by it."""
    from harnessrl.types import RolloutStatus

    gw, r, c, histories = _rendered_rollout(make_gateway)
    refused = gw.admin.post(f"/admin/rollouts/{r.id}/closed", json={})
    assert refused.status_code == 409 and "close it first" in refused.text
    assert r.id in histories  # still open: kept
    assert gw.admin.post("/admin/rollouts/nope/closed", json={}).status_code == 404
    gw.store.transition_rollout(r.id, RolloutStatus.RUNNING)
    gw.store.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    assert r.id in histories  # the gateway does not read the store for this
    done = gw.admin.post(f"/admin/rollouts/{r.id}/closed", json={})
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    assert r.id not in histories and r.id not in gw.gateway.pool._affinity
    with pytest.raises(openai.APIStatusError) as late:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hello"}], max_tokens=4)
    assert late.value.status_code == 410
    assert len(gw.store.get_calls(r.id)) == 1
