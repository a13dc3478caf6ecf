"""Google's ``google-genai`` client (Gemini API: generateContent, streamGenerateContent with ``alt=sse``)
running a two-turn tool agent against the gateway, with its base URL set as the Gemini CLI sets its own."""

from __future__ import annotations

import pytest
from client_checks import PROMPT, TOOL_DESCRIPTION, TOOL_NAME, check_tool_loop, double
from google import genai
from google.genai import errors, types

from harnessrl.types import ApiKind

TOOLS = [types.Tool(function_declarations=[types.FunctionDeclaration(
    name=TOOL_NAME, description=TOOL_DESCRIPTION,
    parameters=types.Schema(type=types.Type.OBJECT, properties={"n": types.Schema(type=types.Type.INTEGER)},
                            required=["n"]))])]
CONFIG = types.GenerateContentConfig(system_instruction="You are terse.", tools=TOOLS, max_output_tokens=256)


def _client(r, api_version: str | None = None) -> genai.Client:
    """GOOGLE_GEMINI_BASE_URL style: the rollout's URL without /v1; the client appends ``/<version>/models/...``
    (``v1`` by default in google-genai 3, ``v1beta`` in the Gemini CLI)."""
    return genai.Client(api_key=r.api_key, http_options=types.HttpOptions(base_url=r.anthropic_base_url,
                                                                          api_version=api_version))


def _answer(contents: list, calls: list[types.FunctionCall]) -> None:
    contents.append(types.Content(role="user", parts=[
        types.Part.from_function_response(name=c.name or "", response={"result": double(int((c.args or {})["n"]))})
        for c in calls]))


def test_gemini_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    client = _client(r)
    contents: list = [types.Content(role="user", parts=[types.Part.from_text(text=PROMPT)])]
    for _ in range(4):
        resp = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=CONFIG)
        assert resp.candidates and resp.candidates[0].content
        contents.append(resp.candidates[0].content)
        if not resp.function_calls:
            break
        _answer(contents, resp.function_calls)
    assert resp.candidates[0].finish_reason == types.FinishReason.STOP
    assert resp.usage_metadata and resp.usage_metadata.candidates_token_count
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.GEMINI, resp.text or "")
    assert {c.requested_model for c in stack.store.get_calls(r.id)} == {"gemini-2.5-flash"}


def test_gemini_streaming_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    client = _client(r, "v1beta")
    contents: list = [types.Content(role="user", parts=[types.Part.from_text(text=PROMPT)])]
    for _ in range(4):
        parts: list[types.Part] = []
        chunks = list(client.models.generate_content_stream(model="gemini-2.5-pro", contents=contents,
                                                            config=CONFIG))
        for chunk in chunks:
            if chunk.candidates and chunk.candidates[0].content:
                parts += chunk.candidates[0].content.parts or []
        assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
        contents.append(types.Content(role="model", parts=parts))
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            break
        _answer(contents, calls)
    assert len(chunks) > 2  # the text came in pieces, as sampled
    text = "".join(p.text or "" for p in parts)
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.GEMINI, text)


def test_gemini_errors_in_googles_shape(stack):
    r = stack.rollout()
    wrong = genai.Client(api_key="not-the-key", http_options=types.HttpOptions(base_url=r.anthropic_base_url))
    with pytest.raises(errors.ClientError) as err:
        wrong.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert err.value.code == 403 and err.value.status == "PERMISSION_DENIED"
    client = _client(r)
    image = types.Part.from_bytes(data=b"\x89PNG", mime_type="image/png")
    with pytest.raises(errors.ClientError) as err:
        client.models.generate_content(model="gemini-2.5-flash", contents=[image])
    assert err.value.code == 400 and err.value.status == "INVALID_ARGUMENT"
    assert "inlineData" in (err.value.message or "") and "text only" in (err.value.message or "")
    assert client.models.count_tokens(model="gemini-2.5-flash", contents="hello").total_tokens
    assert [m.name for m in client.models.list()] == ["models/policy"]
    assert client.models.get(model="gemini-2.5-flash").name == "models/gemini-2.5-flash"
