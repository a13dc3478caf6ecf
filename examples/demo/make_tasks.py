"""Generates the demo's atlas (kb.json) and tasks (train.jsonl, eval.jsonl) from a fixed seed.

Countries and their facts are invented, so the model cannot answer from memory: it has to search and
then answer with exactly the name it found. Held-out tasks ask about countries never trained on.
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYLLABLES = ["ka", "lo", "mi", "ra", "ven", "tor", "sel", "du", "nar", "ph", "qui", "bel", "zan", "mor",
             "ti", "gra", "os", "lin", "fe", "wu", "sha", "rok", "el", "pa", "dri", "vo", "nes", "cam"]


def name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def main() -> None:
    rng = random.Random(7)
    used: set[str] = set()

    def fresh(parts: int) -> str:
        while True:
            n = name(rng, parts)
            if n not in used and len(n) >= 4:
                used.add(n)
                return n

    kb, tasks = [], []
    for i in range(160):
        country, capital, river = fresh(3), fresh(2), fresh(2)
        kb += [f"The capital of {country} is {capital}.", f"The longest river of {country} is the {river}."]
        tasks.append({"id": f"atlas-{i:03d}", "input": {"question": f"What is the capital of {country}?"},
                      "verifier_input": {"answer": capital}})
    (HERE / "kb.json").write_text(json.dumps(kb, indent=0))
    for split, chunk in (("train", tasks[:120]), ("eval", tasks[120:])):
        (HERE / f"{split}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in chunk))


main()
