"""The demo's research agent, run inside each task's own container (examples/containers/README.md).

It knows nothing about harnessrl or containers: it reads OPENAI_BASE_URL / OPENAI_API_KEY, the task's
instruction (HARNESSRL_TASK_INSTRUCTION, or its first argument), and searches the atlas it finds in its
working directory (the task image's /app/atlas.json: each task's container holds its own). The answer goes
to answer.txt, where the task's tests read it after the agent has exited.
"""

import json
import os
import re
import sys
from pathlib import Path

from openai import OpenAI

KB = json.loads(Path("atlas.json").read_text())  # the task container's own atlas (cwd: /app)
TOOLS = [{
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the atlas for facts about a country.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to look up, e.g. a country name"}},
            "required": ["query"],
        },
    },
}]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


FACT_WORDS = [_words(fact) for fact in KB]
DF = {w: sum(w in ws for ws in FACT_WORDS) for ws in FACT_WORDS for w in ws}


def search(query: str, k: int = 1) -> str:
    """The k facts that best match the query, rare words counting most (tf-idf without the tf)."""
    q = _words(query)
    scores = [sum(1.0 / DF[w] for w in q & ws) for ws in FACT_WORDS]
    best = sorted(range(len(KB)), key=lambda i: -scores[i])[:k]
    return "\n".join(KB[i] for i in best if scores[i] > 0) or "No results."


def query_of(call) -> str:
    """The search query of a tool call (its raw arguments when they are not a JSON object)."""
    try:
        return str(json.loads(call.function.arguments).get("query", ""))
    except (json.JSONDecodeError, AttributeError):
        return call.function.arguments or ""


def final_answer(client: OpenAI, messages: list[dict]) -> str:
    """Ask for the answer once the search results are in the conversation; answer.txt is what is scored."""
    final = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, max_tokens=16)
    return (final.choices[0].message.content or "").strip()


def submit(answer: str) -> int:
    Path("answer.txt").write_text(answer)
    print(answer)
    return 0


def main() -> int:
    instruction = os.environ.get("HARNESSRL_TASK_INSTRUCTION") or sys.argv[1]
    question = instruction.split("?")[0].strip() + "?"  # the rest says where to look and write
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    messages = [
        {"role": "system", "content": "You answer questions about countries. Use the search tool to look up facts."},
        {"role": "user", "content": f"{question} Reply with only the name."},
    ]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, max_tokens=24)
    msg = first.choices[0].message
    if msg.tool_calls:
        call = msg.tool_calls[0]
        query = query_of(call)
        messages.append({"role": "assistant", "content": msg.content or "",
                         "tool_calls": [tc.model_dump() for tc in msg.tool_calls[:1]]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": search(query)})
    else:
        # Small models often answer in prose instead of calling the tool: search for the question itself.
        messages.append({"role": "assistant", "content": msg.content or ""})
        messages.append({"role": "user", "content": "Search results:\n" + search(question)
                         + "\nReply with only the name."})
    return submit(final_answer(client, messages))


if __name__ == "__main__":
    sys.exit(main())
