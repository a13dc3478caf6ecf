"""Verifier: 1.0 for exactly the reference name, 0.25 for the name inside a short answer, else 0.

Empty, missing or long rambling answers get 0, so the policy cannot win by saying nothing or by
listing every name it saw.
"""

import json
import os
import re
from pathlib import Path


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def main() -> None:
    expected = json.loads(os.environ["HARNESSRL_VERIFIER_INPUT"])["answer"].lower()
    path = Path("answer.txt")
    answer = words(path.read_text()) if path.is_file() else []
    if answer == [expected]:
        print(1.0)
    elif expected in answer and len(answer) <= 12 and answer.count(expected) == 1:
        print(0.25)
    else:
        print(0.0)


main()
