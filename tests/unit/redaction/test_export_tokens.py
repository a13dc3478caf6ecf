"""``harnessrl export`` over a store whose token IDs still spell a key (recorded before token redaction):
the run's tokenizer finds it, the record holds placeholders, untrained and counted."""

from __future__ import annotations

import json
from pathlib import Path

from harnessrl.cli import main
from harnessrl.models import load_tokenizer
from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

SECRET = "sk-live-4f9Qz7XbT2mK8wR1nV6cY3hJ"


def test_export_scrubs_token_ids_the_store_kept(tmp_path: Path) -> None:
    tok = load_tokenizer("tiny")
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.create_run("r", {"engine": {"model": "tiny"}}, run_id="run-1")
    r = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id="run-1")
    prompt = tok.encode(f"my key is {SECRET} ok", add_special_tokens=False)
    completion = tok.encode(f" using {SECRET} now", add_special_tokens=False)
    store.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {"messages": []}, {"choices": []}, prompt,
                                [ChoiceTokens(completion, [-0.5] * len(completion), "stop")], 0,
                                sampling={"temperature": 1.0})])
    store.close()
    out = tmp_path / "x.jsonl"
    assert main(["export", "--db", url, "--format", "jsonl", "--out", str(out)]) == 0
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    text = tok.decode(rec["token_ids"])
    assert SECRET not in text and "4f9Qz7" not in text and text.endswith(" now")
    hidden = [i for i, (a, b) in enumerate(zip(rec["token_ids"], prompt + completion, strict=True)) if a != b]
    assert hidden and rec["redacted"] == len(hidden)
    assert all(rec["loss_mask"][i] == 0 and rec["behaviour_logprobs"][i] == 0.0 for i in hidden)
    assert sum(rec["loss_mask"]) == len(completion) - len([i for i in hidden if i >= len(prompt)]) > 0
