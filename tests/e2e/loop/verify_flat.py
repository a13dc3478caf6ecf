"""Reward for the dynamic-sampling test: the same 0.5 for every attempt of a `flat` task, else varied."""

import json
import os
import zlib
from pathlib import Path

flat = json.loads(os.environ.get("HARNESSRL_VERIFIER_INPUT") or "{}").get("flat", False)
answer = Path("answer.txt").read_text() if Path("answer.txt").exists() else ""
print(0.5 if flat else (zlib.crc32(answer.encode()) % 7) / 6)
