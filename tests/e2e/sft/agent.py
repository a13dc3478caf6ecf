"""Test harness: one chat call with the task's question, the reply written to answer.txt."""

import os
from pathlib import Path

from openai import OpenAI

client = OpenAI(max_retries=0)
question = os.environ.get("HARNESSRL_TASK_QUESTION", "hello")
reply = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": question}],
                                       max_tokens=int(os.environ.get("HARNESSRL_TASK_MAX_TOKENS", "6")))
Path("answer.txt").write_text(reply.choices[0].message.content or "")
