"""Train on what the embedded engine sampled, publish in-process, and see the engine serve the update."""

from __future__ import annotations

import copy

import pytest
import torch

from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.forward import token_logprobs
from harnessrl.training.losses import token_weights
from harnessrl.training.micro_batches import make_micro_batches
from harnessrl.training.samples import build_samples
from harnessrl.training.trainer import Trainer
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens
from harnessrl.weights.publish import InProcessPublisher

embedded = pytest.importorskip("harnessrl.engines.embedded")
tiny = pytest.importorskip("harnessrl.models.tiny")


def _trainer_logprobs(model, sample) -> list[float]:
    (mb,) = make_micro_batches([sample], token_weights([sample], "token"), 10_000)
    with torch.no_grad():
        return token_logprobs(model, mb, torch.device("cpu"))[0].tolist()


def _generate(engine, prompt: list[int]) -> Call:
    out = engine.generate(prompt, embedded.SamplingParams(max_tokens=6, seed=1, ignore_eos=True), timeout=60)
    ch = out.choices[0]
    return Call(rollout_id="r", index=0, api=ApiKind.COMPLETIONS, status=CallStatus.OK, request={}, response=None,
                prompt_token_ids=out.prompt_token_ids, choices=[ChoiceTokens(ch.token_ids, ch.logprobs)],
                policy_version=out.policy_version)


def test_engine_samples_train_and_publish_round_trip():
    model, tokenizer = tiny.tiny_model()
    engine = embedded.EmbeddedEngine(copy.deepcopy(model), tokenizer)
    try:
        prompt = tokenizer.encode("hello world, the answer is")
        call = _generate(engine, prompt)
        (sample,) = build_samples([call], "g").samples
        trainer = Trainer(model, TrainingConfig(lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
                                                lr=5e-2, device="cpu"),
                          publisher=InProcessPublisher(engine))
        # fidelity: the trainer scores the engine's tokens with the engine's logprobs
        assert _trainer_logprobs(trainer.model, sample) == pytest.approx(call.completion_logprobs, abs=1e-4)
        trained = sample.__class__(**{**{f: getattr(sample, f) for f in sample.__slots__}, "advantage": 1.0})
        trainer.step([trained])
        assert trainer.publish() == 1 and engine.version == 1
        after = _trainer_logprobs(trainer.model, sample)
        assert after != pytest.approx(call.completion_logprobs, abs=1e-3)  # the update moved the policy
        # the engine now serves the updated weights: its logprobs of the same tokens match the trainer's
        again = engine.generate(call.prompt_token_ids + call.completion_token_ids[:1],
                                embedded.SamplingParams(max_tokens=1, seed=1), timeout=60)
        assert again.policy_version == 1
        probe = call.__class__(**{**{f: getattr(call, f) for f in call.__slots__},
                                  "prompt_token_ids": again.prompt_token_ids,
                                  "choices": [ChoiceTokens(again.choices[0].token_ids, again.choices[0].logprobs)]})
        (probe_sample,) = build_samples([probe], "g").samples
        assert _trainer_logprobs(trainer.model, probe_sample) == pytest.approx(again.choices[0].logprobs, abs=1e-4)
    finally:
        engine.close()
