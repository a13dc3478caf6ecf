"""A harness for the eval tests: one chat call through the gateway, then the answer its harness config names.

What it answers is set per harness (``EVAL_ANSWER`` in ``[harnesses.<name>] env``), so two harnesses differ
in a known way; the call makes every attempt a recorded rollout like any other.
"""

import os
from pathlib import Path

from openai import OpenAI

client = OpenAI()
client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
Path("answer.txt").write_text(os.environ.get("EVAL_ANSWER", "right"))
