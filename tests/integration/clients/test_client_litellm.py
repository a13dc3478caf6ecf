"""litellm's OpenAI-compatible provider (what mini-swe-agent uses) running a two-turn tool agent."""

from __future__ import annotations

import json

import pytest
from client_checks import PROMPT, TOOL_DESCRIPTION, TOOL_NAME, check_tool_loop, double

from harnessrl.types import ApiKind

litellm = pytest.importorskip("litellm")  # optional extra: pip install -e ".[harnesses]"
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic notes about litellm's types

TOOLS = [{"type": "function", "function": {
    "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]


def test_litellm_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    messages: list = [{"role": "user", "content": PROMPT}]
    for _ in range(4):
        # "openai/<name>" = any OpenAI-compatible server; the name without the prefix reaches the gateway
        resp = litellm.completion(model="openai/policy", api_base=r.base_url, api_key=r.api_key,
                                  messages=messages, tools=TOOLS, num_retries=0)
        msg = resp.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            break
        messages += [{"role": "tool", "tool_call_id": tc.id, "content": double(json.loads(tc.function.arguments)["n"])}
                     for tc in msg.tool_calls]
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.CHAT, msg.content)
    assert stack.store.get_calls(r.id)[0].requested_model == "policy"
