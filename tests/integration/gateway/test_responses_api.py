"""The official openai client's Responses API through the gateway: text, function calls, streaming."""

from __future__ import annotations

import openai
import pytest
from fakes.fake_engine import END, render_chat

from harnessrl.types import ApiKind, CallStatus, Fidelity

TOOLS = [{"type": "function", "name": "bash", "description": "run", "strict": False,
          "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}]


def test_responses_text_tools_stream(gw):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    resp = c.responses.create(model="gpt-4.1", instructions="Be terse.", input="hello", max_output_tokens=64)
    assert resp.status == "completed" and resp.output_text
    (call,) = gw.store.get_calls(r.id)
    assert call.api == ApiKind.RESPONSES and call.request["input"] == "hello"
    assert call.prompt_token_ids == render_chat([{"role": "system", "content": "Be terse."},
                                                 {"role": "user", "content": "hello"}])
    assert call.completion_token_ids == [*resp.output_text.encode(), END]

    items: list = [{"role": "user", "content": "list files"}]
    first = c.responses.create(model="gpt-4.1", input=items, tools=TOOLS)
    fc = next(o for o in first.output if o.type == "function_call")
    assert fc.name == "bash"
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": fc.call_id, "output": "a.txt"})
    with c.responses.stream(model="gpt-4.1", input=items, tools=TOOLS) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text and final.status == "completed"
    calls = gw.store.get_calls(r.id)
    assert calls[2].fidelity == Fidelity.EXTENDED
    assert calls[2].response["output"][0]["content"][0]["text"] == final.output_text

    truncated = c.responses.create(model="m", input="x", max_output_tokens=3)
    assert truncated.status == "incomplete" and truncated.incomplete_details.reason == "max_output_tokens"


def test_responses_unknown_previous_response_id_is_a_clear_400(gw):
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        c.responses.create(model="m", input="x", previous_response_id="resp_123")
    (refused,) = gw.store.get_calls(r.id)
    assert refused.status == CallStatus.REFUSED and "unknown_previous_response" in (refused.error or "")
