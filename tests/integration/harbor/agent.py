"""Test harness for Harbor tasks: asks the model once with the task's instruction (the official openai client,
through the rollout's gateway route) and changes nothing, so every task's tests score it 0."""

import os

from openai import OpenAI

instruction = os.environ["HARNESSRL_TASK_INSTRUCTION"]
OpenAI(max_retries=0).chat.completions.create(
    model="policy", messages=[{"role": "user", "content": instruction}], max_tokens=8)
