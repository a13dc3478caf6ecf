"""The OpenAI Agents SDK (``openai-agents``): a function-tool agent over the Responses API (its default,
streamed as ``Runner.run_streamed`` does) and over chat completions.

Offline: ``OPENAI_AGENTS_DISABLE_TRACING=1`` (set in conftest before the import), or the SDK posts traces
to a fixed internet address.
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from client_checks import PROMPT, TOOL_NAME, check_tool_loop, double

from harnessrl.types import ApiKind

agents = pytest.importorskip("agents")  # optional extra: pip install -e ".[harnesses]"


@agents.function_tool(name_override=TOOL_NAME)
def double_tool(n: int) -> str:
    """Double an integer."""
    return double(n)


def make_agent(model) -> agents.Agent:
    return agents.Agent(name="doubler", instructions="You are terse.", tools=[double_tool], model=model)


def test_agents_sdk_responses_streamed(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)

    async def run() -> str:
        client = openai.AsyncOpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
        model = agents.OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        result = agents.Runner.run_streamed(make_agent(model), PROMPT)
        async for _ in result.stream_events():
            pass
        await client.close()
        return str(result.final_output)

    answer = asyncio.run(run())
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.RESPONSES, answer)


def test_agents_sdk_chat_completions(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)

    async def run() -> str:
        client = openai.AsyncOpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
        model = agents.OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
        result = await agents.Runner.run(make_agent(model), PROMPT)
        await client.close()
        return str(result.final_output)

    answer = asyncio.run(run())
    check_tool_loop(stack.store, r.id, list(stack.engine.requests)[since:], ApiKind.CHAT, answer)
