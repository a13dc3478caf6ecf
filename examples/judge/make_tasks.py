"""Builds the judge example's tasks and labelled set from the CPU demo's atlas (examples/demo).

The tasks are the demo's, with a rubric in place of the exact-match verifier: a judge model reads the
attempt's transcript and grades the final answer against the reference named in the rubric (the rubric
is a task asset: the harness never sees it). labelled.jsonl holds answers people would grade, five per
task (the name, the name in a sentence, a wrong name, the river instead of the capital, a hedge between two
names), for `harnessrl judge-check`. Deterministic: rerun it and nothing changes.
"""

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent / "demo"
RUBRIC = (
    "Grade the agent's final answer to the question.\n"
    "Reference answer: {capital}\n"
    "Score 1.0 if the final answer is exactly the reference name; 0.5 if it states the reference name in a "
    "short sentence; 0.0 if it names anything else, hedges between several names, or gives no answer."
)


def tasks(split: str) -> list[dict]:
    return [json.loads(line) for line in (DEMO / f"{split}.jsonl").read_text().splitlines() if line.strip()]


def main() -> None:
    kb = json.loads((DEMO / "kb.json").read_text())
    rivers = {m.group(1): m.group(2) for f in kb if (m := re.match(r"The longest river of (\w+) is the (\w+)\.", f))}
    for split in ("train", "eval"):
        out = []
        for t in tasks(split):
            capital = t["verifier_input"]["answer"]
            out.append({"id": t["id"], "input": t["input"], "rubric": RUBRIC.format(capital=capital)})
        (HERE / f"{split}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in out))
    held_out = tasks("eval")[:12]
    lines = []
    for i, t in enumerate(held_out):
        capital = t["verifier_input"]["answer"]
        country = t["input"]["question"].removeprefix("What is the capital of ").rstrip("?")
        other = held_out[(i + 1) % len(held_out)]["verifier_input"]["answer"]
        answers = [(capital, 1.0), (f"The capital of {country} is {capital}.", 1.0), (other, 0.0),
                   (rivers[country], 0.0), (f"{capital} or {other}, I am not sure.", 0.0)]
        for answer, label in answers:
            lines.append({"task_id": t["id"], "input": t["input"], "rubric": RUBRIC.format(capital=capital),
                          "answer": answer, "label": label})
    (HERE / "labelled.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


main()
