"""A harness for the fault suite: one streamed chat call with the official openai client, no retries.

Exit 0 when the whole answer arrived, 1 when the stream failed (the error is printed), 2 for a 4xx.
With ``HARNESSRL_TASK_MODE=work`` it then works on its own for ``HARNESSRL_TASK_WORK_S`` seconds.
"""

import os
import sys
import time

import openai
from openai import OpenAI

client = OpenAI(max_retries=0, timeout=120)
try:
    stream = client.chat.completions.create(
        model="policy", stream=True,
        messages=[{"role": "user", "content": os.environ.get("HARNESSRL_TASK_QUESTION", "hello")}])
    text = "".join((c.choices[0].delta.content or "") for c in stream if c.choices)
except openai.APIStatusError as exc:
    print(f"refused: {exc}", file=sys.stderr)
    sys.exit(2 if exc.status_code < 500 else 1)
except openai.APIError as exc:
    print(f"the model call failed: {exc}", file=sys.stderr)
    sys.exit(1)
if os.environ.get("HARNESSRL_TASK_MODE") == "work":
    time.sleep(float(os.environ.get("HARNESSRL_TASK_WORK_S", "30")))
print(text)
