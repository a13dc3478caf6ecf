"""Reward 1.0 when the answer is exactly the word 'print', else 0 (a random tiny model almost never says it)."""

from pathlib import Path

answer = Path("answer.txt").read_text() if Path("answer.txt").exists() else ""
print(1.0 if answer.strip() == "print" else 0.0)
