"""What redacting secrets in token IDs costs the recorder, next to writing the call to SQLite.

For prompts of several lengths (SmolLM2's tokenizer, source text as content), times the recorder's
redaction of one call (``Recorder._redacted``: text, then token IDs) for a clean call and for one whose
prompt and completion hold a key, on the byte-level path and on the any-tokenizer path (prefix decoding),
and the store's ``record_calls`` of the same call, and prints the ratios.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/redact_tokens.py
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

from harnessrl.gateway.recorder import Recorder
from harnessrl.models import load_tokenizer
from harnessrl.redaction.text import DEFAULT_REDACTIONS, Redactor
from harnessrl.redaction.tokens import TokenRedactor
from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

SECRET = "sk-live-4f9Qz7XbT2mK8wR1nV6cY3hJ"


def timed(fn, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1000, 8000, 32000])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    tok = load_tokenizer("smollm2")
    source = "".join(p.read_text() for p in sorted(Path("harnessrl").rglob("*.py")))
    print(f"{'prompt':>7} {'clean ms':>9} {'key ms':>8} {'key, any-tokenizer ms':>22} {'SQLite write ms':>16} "
          f"{'key / write':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        run = store.create_run("bench", {})
        for n in args.lengths:
            body = tok.decode(tok.encode(source)[:n])
            text_clean = body
            text_key = body[: len(body) // 2] + f" key={SECRET} " + body[len(body) // 2:]
            def call_of(content: str, answer: str) -> NewCall:
                msgs = [{"role": "user", "content": content}]
                ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
                completion = tok.encode(answer, add_special_tokens=False)
                return NewCall("", ApiKind.CHAT, CallStatus.OK, {"messages": msgs},
                               {"choices": [{"message": {"content": answer}}]}, tok.encode(ids, add_special_tokens=False),
                               [ChoiceTokens(completion, [-0.1] * len(completion), "stop")], 0)

            clean, keyed = call_of(text_clean, "I will do that now."), call_of(text_key, f"I will use {SECRET} now.")
            fast = Recorder(store, Redactor(DEFAULT_REDACTIONS), tokens=TokenRedactor(DEFAULT_REDACTIONS, tok))
            slow_tokens = TokenRedactor(DEFAULT_REDACTIONS, tok)
            slow_tokens._byte_level = False
            slow = Recorder(store, Redactor(DEFAULT_REDACTIONS), tokens=slow_tokens)
            t_clean = timed(lambda r=fast, c=clean: r._redacted(copy.copy(c)), args.repeat)
            t_key = timed(lambda r=fast, c=keyed: r._redacted(copy.copy(c)), args.repeat)
            t_any = timed(lambda r=slow, c=keyed: r._redacted(copy.copy(c)), max(3, args.repeat // 3))
            checked = fast._redacted(copy.copy(keyed))
            assert SECRET not in tok.decode(checked.prompt_token_ids), "the key survived"

            def write(checked: NewCall = checked) -> None:
                r = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="x", run_id=run.id)
                c = copy.copy(checked)
                c.rollout_id = r.id
                store.record_calls([c])

            t_write = timed(write, args.repeat)
            print(f"{len(clean.prompt_token_ids):>7} {t_clean * 1e3:>9.2f} {t_key * 1e3:>8.2f} {t_any * 1e3:>22.1f} "
                  f"{t_write * 1e3:>16.2f} {t_key / t_write:>11.2f}x")
        store.close()


if __name__ == "__main__":
    main()
