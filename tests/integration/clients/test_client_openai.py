"""The official openai client (sync, async, streaming) running a two-turn tool agent through the gateway."""

from __future__ import annotations

import asyncio
import json

import openai
from client_checks import PROMPT, TOOL_DESCRIPTION, TOOL_NAME, check_tool_loop, double

from harnessrl.types import ApiKind

TOOLS = [{"type": "function", "function": {
    "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]


def run_tool(call) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "content": double(json.loads(call.function.arguments)["n"])}


def test_sync_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    client = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    messages: list = [{"role": "user", "content": PROMPT}]
    for _ in range(4):
        msg = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            break
        messages += [run_tool(tc) for tc in msg.tool_calls]
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.CHAT, msg.content)


def test_async_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)

    async def agent() -> str:
        async with openai.AsyncOpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0) as client:
            messages: list = [{"role": "user", "content": PROMPT}]
            for _ in range(4):
                resp = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
                msg = resp.choices[0].message
                messages.append(msg.model_dump(exclude_none=True))
                if not msg.tool_calls:
                    return msg.content or ""
                messages += [run_tool(tc) for tc in msg.tool_calls]
        raise AssertionError("the agent never finished")

    answer = asyncio.run(agent())
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.CHAT, answer)


def test_streaming_agent(stack):
    """Tool calls arrive as deltas (name first, arguments later) and are assembled by the agent."""
    r = stack.rollout()
    since = len(stack.engine.requests)
    client = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    messages: list = [{"role": "user", "content": PROMPT}]
    for _ in range(4):
        text, calls = "", {}
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS,
                                                stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for d in choice.delta.tool_calls or ():
                    tc = calls.setdefault(d.index, {"id": "", "type": "function",
                                                    "function": {"name": "", "arguments": ""}})
                    tc["id"] = d.id or tc["id"]
                    tc["function"]["name"] += (d.function and d.function.name) or ""
                    tc["function"]["arguments"] += (d.function and d.function.arguments) or ""
        if not calls:
            break
        messages.append({"role": "assistant", "content": text or None, "tool_calls": list(calls.values())})
        messages += [{"role": "tool", "tool_call_id": tc["id"],
                      "content": double(json.loads(tc["function"]["arguments"])["n"])} for tc in calls.values()]
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.CHAT, text)
