"""Production mode serves Google's Gemini API too, with the real google-genai client: sessions by path,
header and conversation opening, streamed calls, countTokens (no session), errors in Google's shape."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types

from harnessrl.types import ApiKind


def _client(base: str, key: str, session: str | None = None) -> genai.Client:
    headers = {"X-Session-Id": session} if session else None
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base, headers=headers))


def test_gemini_calls_carry_their_session(production) -> None:  # noqa: ANN001
    production.deployment("support")
    key = production.key("support")
    named = _client(key.anthropic_base_url, key.key, "gem-1")
    first = named.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert first.sdk_http_response and first.sdk_http_response.headers["x-session-id"] == "gem-1"
    in_path = _client(f"{production.url}/p/support/s/gem-2", key.key)
    text = "".join(c.text or "" for c in in_path.models.generate_content_stream(model="g", contents="hello"))
    assert text
    plain = _client(key.anthropic_base_url, key.key)
    config = types.GenerateContentConfig(system_instruction="be brief")
    a = plain.models.generate_content(model="g", contents="what is 2+2?", config=config)
    history = [types.Content(role="user", parts=[types.Part.from_text(text="what is 2+2?")]),
               a.candidates[0].content if a.candidates and a.candidates[0].content else None,
               types.Content(role="user", parts=[types.Part.from_text(text="sure?")])]
    b = plain.models.generate_content(model="g", contents=history, config=config)
    assert a.sdk_http_response and b.sdk_http_response
    derived = a.sdk_http_response.headers["x-session-id"]
    assert derived.startswith("p-") and b.sdk_http_response.headers["x-session-id"] == derived
    assert plain.models.count_tokens(model="g", contents="hi").total_tokens
    sessions = {s["id"]: s for s in production.sessions("support")}
    assert set(sessions) == {"gem-1", "gem-2", derived} and sessions[derived]["calls"] == 2
    calls = production.store.get_calls(sessions["gem-2"]["rollout_id"])
    assert [c.api for c in calls] == [ApiKind.GEMINI] and calls[0].completion_token_ids
    wrong = _client(key.anthropic_base_url, "wrong")  # kept: a client closes its connections when collected
    with pytest.raises(errors.ClientError) as err:
        wrong.models.generate_content(model="g", contents="hi")
    assert err.value.status in ("UNAUTHENTICATED", "PERMISSION_DENIED")



@pytest.mark.parametrize("images", ["refuse", "pass"])
def test_count_tokens_follows_the_images_rule_like_a_call(make_production, images: str) -> None:  # noqa: ANN001
    """countTokens with an image does what a generateContent call does under ``[gateway] images``: refused in
    Google's shape with the same message (a text-only model), or counted with the image (a model that reads
    them): never the one counted and the other refused."""
    production = make_production(images=images)
    production.deployment("support")
    key = production.key("support")
    client = _client(key.anthropic_base_url, key.key)
    image = types.Part.from_bytes(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 16, mime_type="image/png")
    contents = [types.Content(role="user", parts=[types.Part.from_text(text="what is this?"), image])]
    if images == "pass":
        assert (client.models.count_tokens(model="g", contents=contents).total_tokens or 0) > 0
        return
    refused = []
    for ask in (client.models.count_tokens, client.models.generate_content):
        with pytest.raises(errors.ClientError) as err:
            ask(model="g", contents=contents)
        assert err.value.code == 400
        refused.append(err.value.message)
    assert refused[0] == refused[1] and "image" in (refused[0] or "")
