"""A harness for the eval tests: one chat call through the gateway, then the answer its harness config names.

What it answers is set per harness (``EVAL_ANSWER`` in ``[harnesses.<name>] env``), so two harnesses differ
in a known way; the call makes every attempt a recorded rollout like any other.
"""

import os
import time
from pathlib import Path

from openai import OpenAI

client = OpenAI()
client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
time.sleep(float(os.environ.get("EVAL_AGENT_SLEEP", "0")))  # the kill test stops attempts in flight
Path("answer.txt").write_text(os.environ.get("EVAL_ANSWER", "right"))
