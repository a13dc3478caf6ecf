"""A two-role agent, written the way a harness author would write it: a planner, then a solver.

It knows nothing about harnessrl. The planner (asked for as `gpt-4o-mini`) reads the question and names
what to look up; the agent searches the atlas for exactly that text; the solver (asked for as `gpt-4o`)
reads the question and the search results and answers. A plan that names nothing findable leaves the
solver without the fact, so the run's reward depends on both roles. The answer goes to answer.txt.
harnessrl routes the two model names to two policies (config.toml, [routing]) and trains each.
"""

import json
import os
import re
import sys
from pathlib import Path

from openai import OpenAI

KB = json.loads((Path(__file__).resolve().parent / "kb.json").read_text())  # the demo's atlas


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


FACT_WORDS = [_words(fact) for fact in KB]
DF = {w: sum(w in ws for ws in FACT_WORDS) for ws in FACT_WORDS for w in ws}


def search(query: str) -> str:
    """The fact that best matches the query, rare words counting most."""
    q = _words(query)
    scores = [sum(1.0 / DF[w] for w in q & ws) for ws in FACT_WORDS]
    best = max(range(len(KB)), key=lambda i: scores[i])
    return KB[best] if scores[best] > 0 else "No results."


def main() -> int:
    question = os.environ.get("HARNESSRL_TASK_QUESTION") or sys.argv[1]
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    plan = client.chat.completions.create(model="gpt-4o-mini", max_tokens=12, messages=[
        {"role": "system", "content": "You plan a search in an atlas. Reply with only the country to look up."},
        {"role": "user", "content": question},
    ]).choices[0].message.content or ""
    found = search(plan)  # only what the planner named: the question itself is not searched
    answer = client.chat.completions.create(model="gpt-4o", max_tokens=16, messages=[
        {"role": "system", "content": "You answer questions about countries from search results."},
        {"role": "user", "content": f"{question}\nSearch results:\n{found}\nReply with only the name."},
    ]).choices[0].message.content or ""
    Path("answer.txt").write_text(answer.strip())
    print(json.dumps({"plan": plan.strip(), "answer": answer.strip()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
