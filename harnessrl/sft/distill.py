"""On-policy distillation (``[run] mode = "distill"``): the student samples, a teacher scores its tokens.

Each step's attempts run with the current student, as in RL. The teacher then scores every trained token
of every sample (its logprob of the student's token given the same prefix: the teacher's *prompt
logprobs* on the student's sequence, so teacher and student must share a tokenizer), and each token's
advantage is ``log p_teacher - log p_student`` (the student's behaviour logprob, as sampled). With the
ordinary policy-gradient loss this is the per-token reverse KL to the teacher, ``KL(student || teacher)``,
minimized by its on-policy estimator (as in Agarwal et al. 2024 and Thinking Machines' on-policy
distillation): tokens the teacher finds likelier than the student did are pushed up, the rest down.
Rewards are still recorded (and reported), never trained.

Teachers: ``[distill] teacher_url`` is a vLLM server (``/v1/completions`` with ``prompt_logprobs``);
``[distill] teacher`` is a model spec or a published policy folder loaded in this process, as the
embedded engine loads its model.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from harnessrl.sft.config import DistillConfig
from harnessrl.store import Store
from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import TrainBatch
from harnessrl.types import FailureKind, Rollout, Sample, SampleFidelity


class Teacher(Protocol):
    def logprobs(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """For each sequence, the teacher's logprob of token i given tokens [0, i) (0.0 at i = 0)."""


class LocalTeacher:
    """A causal LM in this process (a model spec, or a folder ``save_pretrained`` wrote), fp32, no grad."""

    def __init__(self, spec: str) -> None:
        from harnessrl.models import load_model

        self.model, _ = load_model(spec)
        self.model.requires_grad_(False)

    def logprobs(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        import torch

        out = []
        with torch.no_grad():
            for seq in sequences:
                ids = torch.tensor([list(seq)])
                logits = self.model(input_ids=ids).logits[0, :-1].float()
                lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
                out.append([0.0, *lp.tolist()])
        return out


class HttpTeacher:
    """A vLLM OpenAI server: ``POST /completions`` with the token IDs as the prompt, ``prompt_logprobs=0``."""

    def __init__(self, url: str, model: str | None = None, timeout_s: float = 300.0) -> None:
        import httpx

        self.client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s)
        self.model = model or self.client.get("/models").raise_for_status().json()["data"][0]["id"]

    def logprobs(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        out = []
        for seq in sequences:
            body = {"model": self.model, "prompt": list(seq), "max_tokens": 1, "prompt_logprobs": 0,
                    "temperature": 1.0}
            resp = self.client.post("/completions", json=body)
            if resp.status_code != 200:
                raise RuntimeError(f"teacher {self.client.base_url} answered {resp.status_code}: {resp.text[:300]}")
            entries = resp.json()["choices"][0].get("prompt_logprobs")
            if not isinstance(entries, list) or len(entries) != len(seq):
                raise RuntimeError(f"teacher {self.client.base_url} returned no prompt_logprobs for the sequence: "
                                   "it must be a vLLM server (prompt_logprobs) sharing the student's tokenizer")
            out.append([0.0 if e is None else float(e[str(t)]["logprob"]) for e, t in zip(entries, seq, strict=True)])
        return out


def make_teacher(config: DistillConfig) -> Teacher:
    if config.teacher_url:
        return HttpTeacher(config.teacher_url, config.teacher_model)
    if config.teacher:
        return LocalTeacher(config.teacher)
    raise ValueError('[run] mode = "distill" needs a teacher: set [distill] teacher = "MODEL" or teacher_url = URL')


def teacher_advantages(samples: Sequence[Sample], teacher: Teacher) -> tuple[list[Sample], list[float]]:
    """``samples`` with token advantages ``log p_teacher - log p_student`` on trained tokens (0 elsewhere),
    and the per-token gaps ``log p_student - log p_teacher`` (reverse-KL terms) of the trained tokens."""
    scored = teacher.logprobs([s.token_ids for s in samples]) if samples else []
    out, gaps = [], []
    for s, t_lp in zip(samples, scored, strict=True):
        adv = [(t - b) if m else 0.0 for t, b, m in zip(t_lp, s.behaviour_logprobs, s.loss_mask, strict=True)]
        gaps += [-a for a, m in zip(adv, s.loss_mask, strict=True) if m]
        out.append(dataclasses.replace(s, advantage=0.0, token_advantages=adv))
    return out, gaps


def distill_batch(store: Store, rollouts: Sequence[Rollout], teacher: Teacher, config: SampleConfig) -> TrainBatch:
    """The step's samples with per-token advantages ``log p_teacher - log p_student`` on sampled tokens."""
    from harnessrl.rewards.outcome import rollout_reward

    counts: Counter[str] = Counter()
    samples = []
    rewards: dict[str, float] = {}
    for r in rollouts:
        if r.failure_kind == FailureKind.INFRA:
            continue
        reward = rollout_reward(store.get_rewards(r.id))
        if reward is not None:
            rewards[r.id] = reward
        built = build_samples(store.get_calls(r.id), r.group_id, config, rollout_id=r.id)
        counts.update(built.counts)
        samples += [s for s in built.samples if s.fidelity != SampleFidelity.RETOKENIZED]
    out, gaps = teacher_advantages(samples, teacher)
    counts["distill.tokens"] += len(gaps)
    batch = TrainBatch(samples=out, rewards=rewards, advantages={}, counts=counts)
    batch.counts["distill.samples"] += len(out)
    if gaps:  # the on-policy estimate of KL(student || teacher) per token, in milli-nats (counts are ints)
        batch.counts["distill.reverse_kl_mnats"] += round(1000 * statistics.fmean(gaps))
    return batch


def reverse_kl(batch: TrainBatch) -> float | None:
    """The step's per-token reverse-KL estimate, in nats (``None`` when nothing was scored)."""
    if not batch.counts.get("distill.tokens"):
        return None
    return batch.counts["distill.reverse_kl_mnats"] / 1000


def teacher_from(config: Any) -> Teacher:
    """The teacher of a ``HarnessConfig`` in distill mode."""
    return make_teacher(config.distill)
