"""OpenAI-style conversations into the store: each assistant turn tokenized with the policy's template."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harnessrl.cli import main
from harnessrl.importer import tokenize_conversation
from harnessrl.models import load_tokenizer
from harnessrl.store import open_store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import SampleFidelity

CHAT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "capital of Quivenzan?"},
        {"role": "assistant", "content": "Shalo"}, {"role": "user", "content": "and of Linrabel?"},
        {"role": "assistant", "content": "Felo"}]


def test_each_assistant_turn_is_the_templates_tokens_with_context_masked() -> None:
    tok = load_tokenizer("tiny")
    turns = tokenize_conversation(tok, CHAT)
    assert len(turns) == 2
    eos = tok.eos_token_id
    for turn, answer in zip(turns, ["Shalo", "Felo"], strict=True):
        assert turn.completion[-1] == eos and eos not in turn.completion[:-1]
        assert tok.decode(turn.completion[:-1]).strip() == answer
        assert not turn.boundary_changed
    # the second turn's prompt extends the first turn's prompt + completion: one merged sample
    first = turns[0].prompt + turns[0].completion
    assert turns[1].prompt[: len(first)] == first
    rendered = tok.apply_chat_template(CHAT, tokenize=False)
    assert rendered.startswith(tok.decode(turns[1].prompt + turns[1].completion))


def test_import_conversations_cli_marks_them_retokenized(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "chats.jsonl"
    src.write_bytes(orjson.dumps({"messages": CHAT, "reward": 1.0, "task_id": "atlas-000"}) + b"\n"
                    + orjson.dumps({"messages": CHAT[:2]}) + b"\n")
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["import", str(src), "--into", db, "--tokenizer", "tiny", "--run", "chats"]) == 0
    assert "imported 1 rollouts" in (err := capsys.readouterr().err) and "skipped.no_assistant_turn 1" in err
    store = open_store(db)
    (r,) = store.list_rollouts(run_id="chats")
    assert r.task_id == "atlas-000" and [w.value for w in store.get_rewards(r.id)] == [1.0]
    (sample,) = build_samples(store.get_calls(r.id), r.group_id).samples
    assert sample.fidelity == SampleFidelity.RETOKENIZED and "tiny's chat template" in (sample.fidelity_reason or "")
    assert sum(sample.loss_mask) == sum(s[1] - s[0] for s in sample.call_spans)
    # RL never takes a ratio against the unknown behaviour logprobs: the batch leaves them out, counted
    batch = batch_from_store(store, [r], TrainingConfig())
    assert batch.samples == [] and batch.counts["excluded.retokenized_samples"] == 1


def test_conversations_need_a_tokenizer(tmp_path: Path) -> None:
    src = tmp_path / "chats.jsonl"
    src.write_bytes(orjson.dumps({"messages": CHAT}) + b"\n")
    with pytest.raises(SystemExit, match="needs the policy's tokenizer"):
        main(["import", str(src), "--into", f"sqlite:///{tmp_path / 'x.db'}"])
