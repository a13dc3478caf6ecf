"""One rule for images on every API, by what the served model reads (``[gateway] images``), with the real
clients: refused alike on chat, Anthropic Messages, Responses and Gemini when the policy reads text only
(the default); passed to the engine as chat ``image_url`` parts when it reads images, recorded as sent and
kept out of training (the trainer reads token IDs, not pixels)."""

from __future__ import annotations

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors, types
from pydantic import ValidationError

from harnessrl.gateway.config import GatewayConfig
from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples
from harnessrl.types import CallStatus

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
DATA_URL = f"data:image/png;base64,{PNG}"
TEXT_ONLY = "cannot be served: the policy behind this gateway reads text only"


def _clients(r):
    return (openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0),
            anthropic.Anthropic(base_url=r.base_url.removesuffix("/v1"), api_key=r.api_key, max_retries=0),
            genai.Client(api_key=r.api_key, http_options=types.HttpOptions(base_url=r.base_url.removesuffix("/v1"),
                                                                           api_version="v1beta")))


def _ask_with_an_image(r) -> list[str]:
    """The same question with one image, on each API; returns what each said (or raises what it refused)."""
    oai, claude, gemini = _clients(r)
    out = [oai.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": DATA_URL}}]}])
        .choices[0].message.content or ""]
    out.append(claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]).content[0].text)
    out.append(oai.responses.create(model="m", max_output_tokens=8, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": DATA_URL}]}])
        .output_text)
    out.append(gemini.models.generate_content(model="gemini-2.5-flash", contents=[types.Content(role="user", parts=[
        types.Part(text="what is this?"), types.Part.from_bytes(data=b"\x89PNG\r\n", mime_type="image/png")])],
        config=types.GenerateContentConfig(max_output_tokens=8)).text or "")
    return out


def test_a_text_only_policy_refuses_images_alike_on_every_api(gw) -> None:
    r = gw.rollout()
    oai, claude, gemini = _clients(r)
    image = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": DATA_URL}}]
    with pytest.raises(openai.BadRequestError) as chat_err:
        oai.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": image}])
    with pytest.raises(anthropic.BadRequestError) as claude_err:
        claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}])
    with pytest.raises(openai.BadRequestError) as resp_err:
        oai.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": DATA_URL}]}])
    with pytest.raises(errors.ClientError) as gemini_err:
        gemini.models.generate_content(model="gemini-2.5-flash", contents=[types.Content(role="user", parts=[
            types.Part.from_bytes(data=b"\x89PNG\r\n", mime_type="image/png")])])
    for err in (chat_err, claude_err, resp_err):
        body = err.value.response.json()
        assert TEXT_ONLY in body["error"]["message"], body
    assert chat_err.value.response.json()["error"]["code"] == "unsupported_content"
    assert gemini_err.value.code == 400 and TEXT_ONLY in str(gemini_err.value)
    assert not gw.engine.requests  # nothing reached the engine
    calls = gw.store.get_calls(r.id)
    assert len(calls) == 4 and {c.status for c in calls} == {CallStatus.REFUSED}
    assert all("unsupported_content" in (c.error or "") for c in calls)


def test_a_policy_that_reads_images_gets_them_as_chat_image_parts_on_every_api(make_gateway) -> None:
    gw = make_gateway(images="pass")
    r = gw.rollout()
    answers = _ask_with_an_image(r)
    assert all(isinstance(a, str) for a in answers)
    sent = gw.engine.requests
    assert len(sent) == 4
    for req in sent:  # every API's image arrives as the same kind of chat part, after the text
        parts = req["messages"][-1]["content"]
        assert [p["type"] for p in parts] == ["text", "image_url"], parts
        assert parts[0]["text"] == "what is this?"
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert sent[0]["messages"][-1]["content"][1]["image_url"]["url"] == DATA_URL  # chat: relayed as sent
    assert sent[1]["messages"][-1]["content"][1]["image_url"]["url"] == DATA_URL  # Anthropic: from its source
    calls = gw.store.get_calls(r.id)
    assert [c.status for c in calls] == [CallStatus.OK] * 4
    assert [c.sampling.get("images") for c in calls] == [1, 1, 1, 1]
    samples = build_samples(calls, "g", SampleConfig(), rollout_id=r.id)
    assert samples.samples == [] and samples.counts["excluded.images"] == 4  # recorded, never trained


def test_with_images_on_media_elsewhere_is_still_refused_with_one_message(make_gateway) -> None:
    gw = make_gateway(images="pass")
    r = gw.rollout()
    _, claude, _ = _clients(r)
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    with pytest.raises(anthropic.BadRequestError, match="images of user turns only"):
        claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [pdf]}])
    with pytest.raises(anthropic.BadRequestError, match="images of user turns only"):
        claude.messages.create(model="c", max_tokens=8, messages=[
            {"role": "user", "content": "look"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]}])
    assert not gw.engine.requests


def test_images_pass_with_the_embedded_engine_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="reads text only"):
        GatewayConfig(engines=["embedded"], images="pass")
