"""render_mode 'gateway': the gateway renders token ids itself and sends them to the engine's /completions."""

from __future__ import annotations

import openai
import pytest

from harnessrl.types import ApiKind, Fidelity

pytest.importorskip("transformers")


def test_gateway_render_mode_sends_token_ids_and_records_them(make_gateway):
    from harnessrl.gateway.render import RenderConfig

    gw = make_gateway(render_mode="gateway", render=RenderConfig(tokenizer="tiny"))
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "Hello there"}]
    resp = c.chat.completions.create(model="gpt-4o", messages=msgs, max_tokens=6)
    sent = gw.engine.requests[-1]
    assert isinstance(sent["prompt"], list) and all(type(t) is int for t in sent["prompt"])
    assert "messages" not in sent and sent["return_token_ids"] is True
    (first,) = gw.store.get_calls(r.id)
    assert first.prompt_token_ids == sent["prompt"]
    assert len(first.completion_token_ids) == 6 and first.choices[0].finish_reason == "length"
    assert resp.choices[0].message.role == "assistant"
    msgs += [resp.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "More"}]
    chunks = list(c.chat.completions.create(model="gpt-4o", messages=msgs, max_tokens=6, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason == "length"
    second = gw.store.get_calls(r.id)[1]
    prefix = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(prefix)] == prefix  # the sampled tokens were reused exactly
    assert second.fidelity in (Fidelity.EXACT, Fidelity.EXTENDED)
    # the translated APIs are token-exact too: they reach the engine as token ids
    out = c.responses.create(model="gpt-4.1", input="Hi", max_output_tokens=4)
    assert out.status == "incomplete" and isinstance(gw.engine.requests[-1]["prompt"], list)
    third = gw.store.get_calls(r.id)[2]
    assert third.api == ApiKind.RESPONSES and third.prompt_token_ids == gw.engine.requests[-1]["prompt"]
    assert third.response["object"] == "response" and len(third.completion_token_ids) == 4


def test_render_mode_without_renderer_is_501(make_gateway, monkeypatch):
    import harnessrl.gateway.app as app_mod

    monkeypatch.setattr(app_mod, "load_renderer", lambda config: None)
    gw = make_gateway(render_mode="gateway")
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 501
