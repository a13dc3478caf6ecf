"""Test harness: an ordinary openai-client agent with one tool, two model calls per attempt.

Behaviour is picked by the task input (`mode`), so one run exercises the failure paths:
normal, crash (exit 3 after one call), hang (sleeps past the timeout), tamper (edits a protected file),
silent (exits 0 without calling the model).
"""

import json
import os
import sys
import time
from pathlib import Path

from openai import OpenAI

mode = os.environ.get("HARNESSRL_TASK_MODE", "normal")
if mode == "silent":
    sys.exit(0)
client = OpenAI(max_retries=0)
tools = [{"type": "function", "function": {"name": "lookup", "description": "look a word up",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
messages = [{"role": "user", "content": os.environ.get("HARNESSRL_TASK_QUESTION", "hello")}]
first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, max_tokens=8)
if mode == "crash":
    sys.exit(3)
if mode == "hang":
    time.sleep(600)
if mode == "tamper":
    Path("protected.txt").write_text("changed by the agent")
messages.append({"role": "assistant", "content": first.choices[0].message.content or ""})
messages.append({"role": "user", "content": "and then?"})
second = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, max_tokens=8)
Path("answer.txt").write_text(second.choices[0].message.content or "")
print(json.dumps({"calls": 2}))
