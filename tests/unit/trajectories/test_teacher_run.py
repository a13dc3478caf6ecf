"""A run recorded from another model (its token IDs are the teacher's) re-tokenized for the student."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.cli import main
from harnessrl.importer import tokenize_conversation
from harnessrl.models import load_tokenizer
from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.training.samples import build_samples
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, RolloutStatus, SampleFidelity

Q = [{"role": "user", "content": "capital of Quivenzan?"}]


def test_a_teacher_run_is_retokenized_and_changed_boundaries_are_counted(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    tok = load_tokenizer("tiny")
    (student_turn,) = tokenize_conversation(tok, [*Q, {"role": "assistant", "content": "Shalo"}])
    src_url = f"sqlite:///{tmp_path / 'teacher.db'}"
    src = open_store(src_url)
    src.create_run("teacher", {}, run_id="teacher")
    recorded = {"bytes": (list(b"xxQ"), [*b"Shalo", 256]),  # another tokenizer's IDs
                "same": (student_turn.prompt, student_turn.completion)}  # a teacher sharing the tokenizer
    for name, (prompt, completion) in recorded.items():
        r = src.create_rollout(task_id=name, input={}, group_id=name, api_key_hash="h", run_id="teacher",
                               metadata={"split": "train"}, rollout_id=name)
        src.transition_rollout(r.id, RolloutStatus.RUNNING)
        src.record_calls([NewCall(r.id, ApiKind.CHAT, CallStatus.OK, {"messages": Q},
                                  {"choices": [{"message": {"role": "assistant", "content": "Shalo"}}]}, prompt,
                                  [ChoiceTokens(completion, [-0.1] * len(completion), "stop")], 0)])
        src.add_reward(r.id, 1.0, "final")
        src.transition_rollout(r.id, RolloutStatus.SUCCEEDED)
    src.close()
    dest = f"sqlite:///{tmp_path / 'student.db'}"
    assert main(["import", src_url, "--from-run", "teacher", "--into", dest, "--tokenizer", "tiny",
                 "--run", "student"]) == 0
    line = capsys.readouterr().err
    assert "imported 2 rollouts" in line and "tokens_changed 1" in line, line
    store = open_store(dest)
    for r in store.list_rollouts(run_id="student"):
        (s,) = build_samples(store.get_calls(r.id), r.group_id).samples
        assert s.fidelity == SampleFidelity.RETOKENIZED and "tiny's chat template" in (s.fidelity_reason or "")
        assert s.token_ids == student_turn.prompt + student_turn.completion
        assert [w.value for w in store.get_rewards(r.id)] == [1.0]
