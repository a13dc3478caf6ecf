"""The demo's research agent without its safety net: the model must call `search` itself.

Same atlas, tool and answer file as examples/demo/agent.py, but no fallback search for the question: a
reply without a tool call is the answer, and since the countries are invented it is wrong. What RL can
teach here is the tool call. SmolLM2-135M calls the tool only when the prompt shows it how, so the
conversation starts with two worked examples (fictional countries that are not in the atlas); with
them, about 30% of its first replies at temperature 0.7 are a well-formed `search` call.

Besides the answer (which the verifier scores), the agent posts `used_tool` (1 or 0) to
HARNESSRL_REWARD_URL when it runs under harnessrl: a named reward recorded next to `final`, for charts.
"""

import importlib.util
import json
import os
import sys
import urllib.request
from pathlib import Path

from openai import OpenAI

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("demo_agent", HERE.parent / "demo" / "agent.py")
assert _spec and _spec.loader
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)  # the demo's TOOLS and search(): one atlas, one tool definition

SYSTEM = "You answer questions about countries. Use the search tool to look up facts."


def ask(question: str) -> dict:
    return {"role": "user", "content": f"{question} Reply with only the name."}


def worked_example(country: str, capital: str) -> list[dict]:
    """One solved question, as real turns: the call, the tool's answer, the name."""
    call = {"id": f"call_{country}", "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"query": country})}}
    return [ask(f"What is the capital of {country}?"),
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"The capital of {country} is {capital}."},
            {"role": "assistant", "content": capital}]


def post_reward(name: str, value: float) -> None:
    """Report a named reward to harnessrl; outside harnessrl there is nowhere to send it."""
    url = os.environ.get("HARNESSRL_REWARD_URL")
    if url:
        body = json.dumps({"name": name, "value": value}).encode()
        headers = {"Content-Type": "application/json",
                   "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}
        req = urllib.request.Request(url, body, headers)
        urllib.request.urlopen(req, timeout=30).close()


def main() -> int:
    question = os.environ.get("HARNESSRL_TASK_QUESTION") or sys.argv[1]
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    messages = [{"role": "system", "content": SYSTEM}, *worked_example("Atlantis", "Poseidonia"),
                *worked_example("Elbonia", "Mudville"), ask(question)]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=demo.TOOLS,
                                           max_tokens=48)
    msg = first.choices[0].message
    call = next((c for c in msg.tool_calls or [] if c.function.name == "search"), None)
    post_reward("used_tool", 1.0 if call else 0.0)
    if call is None:
        return demo.submit((msg.content or "").strip())  # no search, so no facts: a guess
    messages.append({"role": "assistant", "content": msg.content or "", "tool_calls": [call.model_dump()]})
    messages.append({"role": "tool", "tool_call_id": call.id, "content": demo.search(demo.query_of(call))})
    return demo.submit(demo.final_answer(client, messages))


if __name__ == "__main__":
    sys.exit(main())
