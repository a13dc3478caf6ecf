"""The official anthropic client (Messages API, tool_use blocks) running a two-turn tool agent."""

from __future__ import annotations

import anthropic
from client_checks import PROMPT, TOOL_DESCRIPTION, TOOL_NAME, check_tool_loop, double

from harnessrl.types import ApiKind

TOOLS = [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
          "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]


def test_anthropic_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    # as with ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY: the base URL has no /v1
    client = anthropic.Anthropic(base_url=r.anthropic_base_url, api_key=r.api_key, max_retries=0)
    messages: list = [{"role": "user", "content": PROMPT}]
    for _ in range(4):
        msg = client.messages.create(model="claude-sonnet-4-5", max_tokens=256, system="You are terse.",
                                     tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        uses = [b for b in msg.content if b.type == "tool_use"]
        if msg.stop_reason != "tool_use":
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": double(u.input["n"])} for u in uses]})
    answer = "".join(b.text for b in msg.content if b.type == "text")
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.ANTHROPIC_MESSAGES, answer)


def test_anthropic_streaming_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    client = anthropic.Anthropic(base_url=r.anthropic_base_url, api_key=r.api_key, max_retries=0)
    messages: list = [{"role": "user", "content": PROMPT}]
    for _ in range(4):
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=256, tools=TOOLS,
                                    messages=messages) as stream:
            msg = stream.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        if msg.stop_reason != "tool_use":
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": double(b.input["n"])}
            for b in msg.content if b.type == "tool_use"]})
    answer = "".join(b.text for b in msg.content if b.type == "text")
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.ANTHROPIC_MESSAGES, answer)
