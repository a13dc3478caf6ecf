"""On-policy distillation (``[run] mode = "distill"``) on the tiny model, end to end: the student samples
through the real harness and gateway, a teacher (the tiny model after SFT, loaded in-process from its
folder) scores the student's tokens, and the per-token reverse KL to the teacher goes down."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from run_config import TINY_ENGINE, write_run_config

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_train
from harnessrl.models import load_model
from harnessrl.sft.distill import LocalTeacher
from harnessrl.store import open_store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.trainer import Trainer
from harnessrl.training.trainer_state import load_checkpoint
from harnessrl.types import Sample, SampleFidelity
from harnessrl.weights.checkpoints import checkpoint_dir

HERE = Path(__file__).resolve().parent
PROMPTS = [f"question number {i}" for i in range(4)]


def _prompt_ids(tok, question: str) -> list[int]:
    text = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def make_teacher(folder: Path) -> None:
    """The tiny model fine-tuned to answer 'print', saved as a model folder."""
    model, tok = load_model("tiny")
    target = [*tok.encode("print", add_special_tokens=False), tok.eos_token_id]
    samples = []
    for i, q in enumerate(PROMPTS[:4]):
        p = _prompt_ids(tok, q)
        samples.append(Sample(rollout_id=f"r{i}", group_id="g", token_ids=p + target,
                              loss_mask=[0] * len(p) + [1] * len(target), behaviour_logprobs=[0.0] * (len(p) + len(target)),
                              policy_versions=[0], call_indices=[0], fidelity=SampleFidelity.EXACT, advantage=1.0))
    trainer = Trainer(model, TrainingConfig(lr=5e-3, lora=None, trackers=[], device="cpu"))
    trainer.objective = "sft"
    for _ in range(20):
        trainer.step(samples)
    trainer.model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))


@pytest.mark.slow  # ~60-250 s on 2 cores (load): teacher SFT, model load, 2 steps of 4 attempts, final evaluation
def test_distillation_scores_the_students_tokens_with_the_teacher_and_trains(tmp_path: Path) -> None:
    teacher_dir = tmp_path / "teacher"
    make_teacher(teacher_dir)
    cfg = write_run_config(tmp_path, {
        "run": {"name": "distill", "dir": str(tmp_path / "run"), "mode": "distill", "steps": 2, "tasks_per_step": 2,
                "attempts_per_task": 2, "eval_at_start": False},
        "tasks": {"train": str(HERE / "train.jsonl"), "eval": str(HERE / "eval.jsonl")},
        "engine": TINY_ENGINE,
        "runner": {"command": [sys.executable, str(HERE / "agent.py")], "concurrency": 8, "timeout_s": 120},
        "rewards": {"verifier": [sys.executable, str(HERE / "verify.py")]},
        "training": {"lr": 5e-3, "lora": False, "trackers": []},
        "distill": {"teacher": str(teacher_dir)},
    })
    config = load_config(cfg)
    run_train(config)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "samples/count" in m]
    assert len(steps) == 2
    for m in steps:  # every trained token was scored by the teacher
        assert m["count/distill.tokens"] == m["tokens/trained"] > 0
    # the step's reverse-KL estimate is exactly the teacher's scores of the tokens the store recorded
    store = open_store(config.store_url)
    run_id = json.loads((tmp_path / "run" / "run.json").read_text())["run_id"]
    teacher = LocalTeacher(str(teacher_dir))
    gaps = []
    for r in store.list_rollouts(run_id=run_id, step=1, limit=100):
        for s in build_samples(store.get_calls(r.id), r.group_id).samples:
            (t_lp,) = teacher.logprobs([s.token_ids])
            gaps += [b - t for b, t, m in zip(s.behaviour_logprobs, t_lp, s.loss_mask, strict=True) if m]
    assert len(gaps) == steps[0]["count/distill.tokens"]
    assert abs(steps[0]["count/distill.reverse_kl_mnats"] - 1000 * sum(gaps) / len(gaps)) <= 1.0
    # and the student moved
    base, _ = load_model("tiny")
    student, _ = load_model("tiny")
    load_checkpoint(checkpoint_dir(tmp_path / "run", 2), student, torch.optim.AdamW(student.parameters()))
    with torch.no_grad():
        moved = sum(float((a - b).abs().sum()) for a, b in zip(student.parameters(), base.parameters(), strict=True))
    assert moved > 0.0
