"""After a gateway restart, a live rollout that speaks Anthropic Messages or Responses continues where it
was: its next prompt in gateway render mode extends the stored tokens, and previous_response_id still
names the responses it got before the restart."""

from __future__ import annotations

import anthropic
import openai
import pytest

from harnessrl.types import Fidelity

pytest.importorskip("transformers")


def test_restart_keeps_token_history_and_previous_responses(make_gateway):
    from harnessrl.gateway.render import RenderConfig

    config = {"render_mode": "gateway", "render": RenderConfig(tokenizer="tiny")}
    gw = make_gateway(**config)
    r = gw.rollout()
    ant = anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0)
    history = [{"role": "user", "content": "hello"}]
    first = ant.messages.create(model="claude", max_tokens=8, messages=history)
    oai = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    resp = oai.responses.create(model="m", input="count to three", max_output_tokens=8)
    gw.server.stop()

    gw2 = make_gateway(**config)  # same store, fresh memory
    ant = anthropic.Anthropic(base_url=f"{gw2.url}/r/{r.id}", api_key=r.api_key, max_retries=0)
    history += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": "and again"}]
    ant.messages.create(model="claude", max_tokens=8, messages=history)
    oai = openai.OpenAI(base_url=f"{gw2.url}/r/{r.id}/v1", api_key=r.api_key, max_retries=0)
    second = oai.responses.create(model="m", input="four?", previous_response_id=resp.id, max_output_tokens=8)
    assert second.status in ("completed", "incomplete")
    calls = gw2.store.get_calls(r.id)
    assert len(calls) == 4
    assert calls[2].fidelity == Fidelity.EXTENDED, calls[2].fidelity_reason
    assert calls[2].prompt_token_ids[: len(calls[0].prompt_token_ids)] == calls[0].prompt_token_ids
    assert calls[3].fidelity == Fidelity.EXTENDED, calls[3].fidelity_reason
    base = calls[1].prompt_token_ids + calls[1].completion_token_ids
    assert calls[3].prompt_token_ids[: len(base)] == base
