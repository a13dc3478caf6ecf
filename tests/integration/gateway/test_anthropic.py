"""The official anthropic client against /r/{rollout}/v1/messages: text, tools, streaming, recorded."""

from __future__ import annotations

import anthropic
from fakes.fake_engine import END, render_chat

from harnessrl.types import ApiKind, CallStatus, Fidelity

TOOLS = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]


def client(r: dict) -> anthropic.Anthropic:
    # ANTHROPIC_BASE_URL style: no /v1 (the client appends /v1/messages)
    return anthropic.Anthropic(base_url=r["anthropic_base_url"], api_key=r["api_key"], max_retries=0)


def test_messages_text_tools_and_stream(gw):
    r = gw.admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    c = client(r)
    msg = c.messages.create(model="claude-sonnet-4", max_tokens=64, system="Be terse.",
                            messages=[{"role": "user", "content": "hello"}])
    assert msg.stop_reason == "end_turn" and msg.content[0].type == "text"
    (call,) = gw.store.get_calls(r["rollout_id"])
    assert call.api == ApiKind.ANTHROPIC_MESSAGES and call.status == CallStatus.OK
    assert call.requested_model == "claude-sonnet-4" and call.request["system"] == "Be terse."
    assert call.prompt_token_ids == render_chat([{"role": "system", "content": "Be terse."},
                                                 {"role": "user", "content": "hello"}])
    assert call.completion_token_ids == [*msg.content[0].text.encode(), END]
    assert call.response["content"][0]["text"] == msg.content[0].text

    # a tool loop: tool_use comes back, tool_result goes in, and the tokens chain exactly
    history = [{"role": "user", "content": "list files"}]
    first = c.messages.create(model="claude", max_tokens=64, tools=TOOLS, messages=history)
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "bash" and isinstance(use.input, dict)
    history += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a.txt"}]}]
    with c.messages.stream(model="claude", max_tokens=64, tools=TOOLS, messages=history) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn" and text == final.content[0].text
    calls = gw.store.get_calls(r["rollout_id"])
    assert calls[2].fidelity == Fidelity.EXTENDED  # the tool_use block re-rendered to the sampled tokens
    assert gw.engine.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": use.id, "content": "a.txt"}


def test_messages_bad_input(gw):
    r = gw.admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    c = client(r)
    try:
        c.messages.create(model="claude", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    except anthropic.BadRequestError as exc:
        assert "max_tokens" in str(exc)
    else:
        raise AssertionError("max_tokens=0 was accepted")
    (refused,) = gw.store.get_calls(r["rollout_id"])  # recorded as refused: nothing sampled
    assert refused.status == CallStatus.REFUSED and "max_tokens" in (refused.error or "")
