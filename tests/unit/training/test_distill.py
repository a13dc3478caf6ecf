"""On-policy distillation's update on the tiny model, in-process: the student samples, the teacher (the
tiny model fine-tuned to answer 'print') scores the student's tokens, and the exact reverse KL drops."""

from __future__ import annotations

import pytest
import torch

from harnessrl.models import load_model
from harnessrl.sft.distill import LocalTeacher, teacher_advantages
from harnessrl.training.config import TrainingConfig
from harnessrl.training.trainer import Trainer
from harnessrl.types import Sample, SampleFidelity

QUESTIONS = [f"question number {i}" for i in range(4)]


def _prompt(tok, q: str) -> list[int]:
    text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def _sample(prompt: list[int], completion: list[int], logprobs: list[float], rid: str) -> Sample:
    n = len(prompt)
    return Sample(rollout_id=rid, group_id="g", token_ids=prompt + completion, loss_mask=[0] * n + [1] * len(completion),
                  behaviour_logprobs=[0.0] * n + logprobs, policy_versions=[0], call_indices=[0],
                  fidelity=SampleFidelity.EXACT)


def _teacher(tok) -> torch.nn.Module:
    model, _ = load_model("tiny")
    target = [*tok.encode("print", add_special_tokens=False), tok.eos_token_id]
    samples = [_sample(_prompt(tok, q), target, [0.0] * len(target), f"t{i}") for i, q in enumerate(QUESTIONS)]
    t = Trainer(model, TrainingConfig(lr=5e-3, lora=None, trackers=[], device="cpu"))
    t.objective = "sft"
    for _ in range(4):  # a teacher near the student: on-policy samples then carry signal both ways
        t.step(samples)
    return t.model.requires_grad_(False)


def _first_token_kl(student: torch.nn.Module, teacher: torch.nn.Module, tok) -> float:
    total = 0.0
    with torch.no_grad():
        for q in QUESTIONS:
            ids = torch.tensor([_prompt(tok, q)])
            ls = torch.log_softmax(student(input_ids=ids).logits[0, -1].float(), -1)
            lt = torch.log_softmax(teacher(input_ids=ids).logits[0, -1].float(), -1)
            total += float((ls.exp() * (ls - lt)).sum())
    return total / len(QUESTIONS)


def _rollouts(model: torch.nn.Module, tok, step: int) -> list[Sample]:
    """Two sampled answers (3 tokens, temperature 1) per question, with the student's own logprobs."""
    torch.manual_seed(step)
    out = []
    for i, q in enumerate(QUESTIONS):
        p = _prompt(tok, q)
        for j in range(2):
            with torch.no_grad():
                gen = model.generate(torch.tensor([p]), do_sample=True, temperature=1.0, top_k=0, max_new_tokens=3,
                                     output_scores=True, return_dict_in_generate=True, pad_token_id=tok.eos_token_id)
            comp = gen.sequences[0, len(p):].tolist()
            lps = [float(torch.log_softmax(s[0].float(), -1)[t]) for s, t in zip(gen.scores, comp, strict=False)]
            out.append(_sample(p, comp[: len(lps)], lps, f"r{step}-{i}-{j}"))
    return out


@pytest.mark.slow  # ~170 s on 2 cores under load: 12 steps of 8 sampled answers
def test_distillation_steps_lower_the_exact_reverse_kl(tmp_path) -> None:
    student, tok = load_model("tiny")
    teacher_model = _teacher(tok)
    teacher = LocalTeacher.__new__(LocalTeacher)
    teacher.model = teacher_model
    before = _first_token_kl(student, teacher_model, tok)
    # Adam moves every weight ~lr a step whatever the gradient's size: a small lr keeps the noise of an
    # 8-sample estimator from walking the student further than the 4 teacher steps (5e-3) it must undo
    trainer = Trainer(student, TrainingConfig(lr=1e-3, lora=None, trackers=[], device="cpu"))
    for step in range(12):
        samples, gaps = teacher_advantages(_rollouts(trainer.model, tok, step), teacher)
        assert len(gaps) == sum(sum(s.loss_mask) for s in samples)
        trainer.step(samples)
    after = _first_token_kl(trainer.model, teacher_model, tok)
    # measured here: 0.0862 -> 0.0798 (lr 1e-3); at lr 5e-3 the estimator's noise won: 0.086 -> 0.188
    assert after < 0.95 * before, (before, after)


def test_teacher_logprobs_are_its_next_token_logprobs() -> None:
    model, tok = load_model("tiny")
    teacher = LocalTeacher.__new__(LocalTeacher)
    teacher.model = model
    seq = _prompt(tok, "hello") + [5, 6, 7]
    (lp,) = teacher.logprobs([seq])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq[:-1]])).logits[0, -1]
    assert lp[0] == 0.0 and abs(lp[-1] - float(torch.log_softmax(logits, -1)[7])) < 1e-5
    samples, gaps = teacher_advantages([_sample(seq[:-3], [5, 6, 7], [-1.0, -2.0, -3.0], "r")], teacher)
    adv = samples[0].token_advantages
    assert adv is not None and adv[:-3] == [0.0] * (len(seq) - 3)
    assert abs(adv[-1] - (lp[-1] + 3.0)) < 1e-6 and abs(gaps[-1] - (-3.0 - lp[-1])) < 1e-6
