"""The SFT objective: weighted NLL of the trained tokens, blind to behaviour logprobs, rollout-normalized."""

from __future__ import annotations

import torch

from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.forward import token_logprobs
from harnessrl.training.losses import sft_loss, token_weights
from harnessrl.training.micro_batches import make_micro_batches
from harnessrl.training.trainer import Trainer
from harnessrl.types import Sample, SampleFidelity

from ._helpers import tiny_llama


def _sample(tokens: list[int], mask: list[int], rollout: str) -> Sample:
    # behaviour logprobs of 0.0: what a re-tokenized sample carries; PPO would clip at once, SFT ignores them
    return Sample(rollout_id=rollout, group_id="g", token_ids=tokens, loss_mask=mask,
                  behaviour_logprobs=[0.0] * len(tokens), policy_versions=[0], call_indices=[0],
                  fidelity=SampleFidelity.RETOKENIZED, advantage=0.0)


def _nll(model: torch.nn.Module, samples: list[Sample]) -> float:
    weights = token_weights(samples, "rollout")
    total = 0.0
    with torch.no_grad():
        for mb in make_micro_batches(samples, weights, 10_000):
            lp, _ = token_logprobs(model, mb, torch.device("cpu"))
            total += float(sft_loss(lp, mb.weights).loss)
    return total


def test_sft_loss_is_the_weighted_negative_log_likelihood() -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5])
    w = torch.tensor([0.5, 0.25, 0.25])
    assert float(sft_loss(logp, w).loss) == 0.5 * 1.0 + 0.25 * 2.0 + 0.25 * 0.5


def test_sft_steps_raise_the_likelihood_of_the_targets_with_zero_advantage_and_no_logprobs() -> None:
    model = tiny_llama()
    long = _sample(list(range(5, 45)), [0] * 4 + [1] * 36, "chatty")
    short = _sample([3, 9, 27, 81, 7], [0, 0, 0, 1, 1], "short")
    samples = [long, short]
    before = _nll(model, samples)
    trainer = Trainer(model, TrainingConfig(lr=1e-2, device="cpu", micro_batch_tokens=30, trackers=[], lora=None))
    trainer.objective = "sft"
    for _ in range(8):
        m = trainer.step(samples)
    assert m["tokens/trained"] == 38 and m["clip_fraction"] == 0.0
    after = _nll(trainer.model, samples)
    assert after < before - 0.5, (before, after)
    # rollout normalization: the 2-token rollout weighs as much as the 36-token one
    w = token_weights(samples, "rollout")
    assert abs(sum(w[0]) - 0.5) < 1e-9 and abs(sum(w[1]) - 0.5) < 1e-9


def test_the_policy_gradient_objective_does_not_learn_these_samples() -> None:
    """The control: with advantage 0 the RL loss has no gradient, so the SFT branch is what trains."""
    model = tiny_llama()
    samples = [_sample([3, 9, 27, 81, 7], [0, 0, 0, 1, 1], "short")]
    before = _nll(model, samples)
    trainer = Trainer(model, TrainingConfig(lr=5e-3, device="cpu", trackers=[],
                                            lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"])))
    for _ in range(3):
        trainer.step(samples)
    assert abs(_nll(trainer.model, samples) - before) < 1e-4
