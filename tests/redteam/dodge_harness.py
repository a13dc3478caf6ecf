"""A harness that dodges its zero: about to fail, it makes the gateway fail instead.

One honest call, then -- its answer is wrong and it knows it -- a request the serving side cannot serve:
``HARNESSRL_TASK_MODE=overlong`` a streamed prompt longer than the model's context, ``malformed`` a
``logit_bias`` on a token the vocabulary does not have (the engine answers 500). Then it exits 1. If the gateway
blamed itself (a 5xx), the attempt would be ``infra`` and re-run instead of scored 0.
"""

import os
import sys

import openai
from openai import OpenAI

client = OpenAI(max_retries=0, timeout=60)
client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "2+2?"}])
mode = os.environ.get("HARNESSRL_TASK_MODE", "overlong")
try:
    if mode == "overlong":
        stream = client.chat.completions.create(
            model="policy", stream=True, messages=[{"role": "user", "content": "pad " * 4000}])
        for _ in stream:
            pass
    else:
        client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "4"}], logit_bias={"99999999": 100})
except openai.APIError as exc:
    print(f"provoked: {type(exc).__name__}: {exc}", file=sys.stderr)
sys.exit(1)
