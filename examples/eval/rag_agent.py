"""A second harness for the demo's tasks: retrieve first, then ask once, over the Anthropic Messages API.

Where the demo's agent (examples/demo/agent.py, OpenAI chat completions) offers a `search` tool and asks
twice, this one runs the search itself and puts the facts in a single request: the same model and tasks
in another harness, which is what `harnessrl eval` compares. It knows nothing about harnessrl: the
`anthropic` client reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY from the environment.
"""

import os
import sys
from pathlib import Path

import anthropic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "demo"))
from agent import search  # noqa: E402  (the demo agent's search over the same atlas)


def main() -> int:
    question = os.environ.get("HARNESSRL_TASK_QUESTION") or sys.argv[1]
    client = anthropic.Anthropic()
    reply = client.messages.create(
        model="claude-haiku-4-5", max_tokens=16,
        system="You answer questions about countries from the facts given.",
        messages=[{"role": "user", "content": f"Facts:\n{search(question, k=2)}\n\n{question} Reply with only the name."}],
    )
    answer = "".join(block.text for block in reply.content if block.type == "text").strip()
    Path("answer.txt").write_text(answer)
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
