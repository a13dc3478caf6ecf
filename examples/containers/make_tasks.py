"""Writes this example's Harbor task folders (tasks/train, tasks/eval) from the CPU demo's atlas and questions.

Each task is a Harbor task with its own image: ``environment/Dockerfile`` puts a small atlas (the asked
country's facts among a few others') at /app/atlas.json, ``tests/`` hold the expected name and the check,
so the agent must search the atlas of *its* container and write the bare name to /app/answer.txt.
48 train and 24 held-out tasks (the demo's first ones; held-out countries are never trained on).
"""

import argparse
import json
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent / "demo"
TRAIN, EVAL = 48, 24

DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY atlas.json /app/atlas.json
"""
TASK_TOML = """version = "1.0"

[agent]
timeout_sec = 900.0

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 1024
"""
TEST_SH = """#!/bin/bash
# Harbor's contract: write the reward to /logs/verifier/reward.txt. 1.0 for exactly the expected name,
# 0.25 for the name inside a short answer, 0 otherwise (empty answers included).
python3 /tests/check.py "$(cat /tests/expected.txt)" /app/answer.txt > /logs/verifier/reward.txt
"""
CHECK_PY = '''import re
import sys
from pathlib import Path


def words(text):
    return re.findall(r"[a-z]+", text.lower())


expected, path = sys.argv[1].lower(), Path(sys.argv[2])
answer = words(path.read_text()) if path.is_file() else []
if answer == [expected]:
    print(1.0)
elif expected in answer and len(answer) <= 12 and answer.count(expected) == 1:
    print(0.25)
else:
    print(0.0)
'''


def country(question: str) -> str:
    return question.rsplit(" of ", 1)[1].rstrip("?")


def write_task(root: Path, record: dict, kb: list[str], rng: random.Random) -> None:
    question, answer = record["input"]["question"], record["verifier_input"]["answer"]
    name = country(question)
    own = [f for f in kb if f" {name} " in f + " " or f" {name}." in f]
    others = rng.sample([f for f in kb if f not in own], 8)
    atlas = own + others
    rng.shuffle(atlas)
    task = root / record["id"]
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "instruction.md").write_text(f"{question} Look it up in /app/atlas.json, then write only the name "
                                         "to /app/answer.txt.\n")
    (task / "task.toml").write_text(TASK_TOML)
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (task / "environment" / "atlas.json").write_text(json.dumps(atlas, indent=0) + "\n")
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "tests" / "test.sh").chmod(0o755)
    (task / "tests" / "check.py").write_text(CHECK_PY)
    (task / "tests" / "expected.txt").write_text(answer + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE / "tasks", help="where train/ and eval/ go")
    out = parser.parse_args().out
    kb = json.loads((DEMO / "kb.json").read_text())
    rng = random.Random(11)
    for split, count in (("train", TRAIN), ("eval", EVAL)):
        root = out / split
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        records = [json.loads(line) for line in (DEMO / f"{split}.jsonl").read_text().splitlines() if line.strip()]
        for record in records[:count]:
            write_task(root, record, kb, rng)


if __name__ == "__main__":
    main()
