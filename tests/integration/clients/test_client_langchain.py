"""LangChain's ``ChatOpenAI`` (``langchain-openai``) with a bound ``@tool``, in the usual tool loop."""

from __future__ import annotations

import pytest
from client_checks import PROMPT, TOOL_NAME, check_tool_loop, double

from harnessrl.types import ApiKind, Fidelity

langchain_openai = pytest.importorskip("langchain_openai")  # optional extra: pip install -e ".[harnesses]"
from langchain_core.messages import HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402


@tool(TOOL_NAME)
def double_tool(n: int) -> str:
    """Double an integer."""
    return double(n)


def test_langchain_agent(stack):
    r = stack.rollout()
    since = len(stack.engine.requests)
    llm = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=r.base_url, api_key=r.api_key,
                                      max_retries=0).bind_tools([double_tool])
    messages: list = [HumanMessage(PROMPT)]
    for _ in range(4):
        ai = llm.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            break
        messages += [ToolMessage(double_tool.invoke(tc["args"]), tool_call_id=tc["id"]) for tc in ai.tool_calls]
    requests = list(stack.engine.requests)[since:]
    # LangChain keeps tool calls parsed and re-dumps the arguments with json.dumps spacing ('{"n": 27}' for
    # the sampled '{"n":27}'), so an engine that applies the template itself sees different text: the
    # second prompt is re-rendered. Render mode "gateway" compares parsed arguments and stays exact.
    sent = requests[-1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert ": " in sent
    check_tool_loop(stack.store, r.id, requests, ApiKind.CHAT, ai.content, fidelity=Fidelity.RERENDERED)
