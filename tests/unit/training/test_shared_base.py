"""The trainer reads the engine's frozen base weights (one copy in memory) and still publishes exactly."""

from __future__ import annotations

import pytest
import torch

from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.shared_base import can_share, share_frozen_base
from harnessrl.training.trainer import Trainer
from harnessrl.weights.publish import InProcessPublisher

embedded = pytest.importorskip("harnessrl.engines.embedded")
tiny = pytest.importorskip("harnessrl.models.tiny")

from tests.unit.training.test_engine_publish import _generate, _trainer_logprobs  # noqa: E402

LORA = LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"])


def test_shared_copy_reuses_every_tensor_but_not_the_modules():
    model, _ = tiny.tiny_model()
    clone = share_frozen_base(model)
    assert clone is not model and clone.config is not model.config
    for (n, a), (_, b) in zip(model.named_parameters(), clone.named_parameters(), strict=True):
        assert a.data_ptr() == b.data_ptr(), n
    assert can_share(model, lora=True, device=torch.device("cpu"))
    assert not can_share(model, lora=False, device=torch.device("cpu"))  # full fine-tuning writes the weights
    assert not can_share(model.to(torch.bfloat16), lora=True, device=torch.device("cpu"))


def test_trainer_on_shared_base_trains_publishes_and_leaves_the_base_alone():
    from harnessrl.training.samples import build_samples

    model, tokenizer = tiny.tiny_model()
    engine = embedded.EmbeddedEngine(model, tokenizer)
    try:
        before = {n: (p, p.detach().clone()) for n, p in model.named_parameters()}
        prompt = tokenizer.encode("hello world, the answer is")
        call = _generate(engine, prompt)
        (sample,) = build_samples([call], "g").samples
        trainer = Trainer(share_frozen_base(engine.model), TrainingConfig(lora=LORA, lr=5e-2, device="cpu"),
                          publisher=InProcessPublisher(engine))
        assert not hasattr(engine.model, "peft_config")  # the adapter went into the trainer's copy only
        assert _trainer_logprobs(trainer.model, sample) == pytest.approx(call.completion_logprobs, abs=1e-4)
        trained = sample.__class__(**{**{f: getattr(sample, f) for f in sample.__slots__}, "advantage": 1.0})
        trainer.step([trained])
        assert trainer.publish() == 1
        # the engine serves the update (its own adapter copy) on the very same base tensors
        again = engine.generate(call.prompt_token_ids + call.completion_token_ids[:1],
                                embedded.SamplingParams(max_tokens=1, seed=1), timeout=60)
        probe = call.__class__(**{**{f: getattr(call, f) for f in call.__slots__},
                                  "prompt_token_ids": again.prompt_token_ids,
                                  "choices": [type(call.choices[0])(again.choices[0].token_ids,
                                                                    again.choices[0].logprobs)]})
        (probe_sample,) = build_samples([probe], "g").samples
        assert _trainer_logprobs(trainer.model, probe_sample) == pytest.approx(again.choices[0].logprobs, abs=1e-4)
        for name, (param, value) in before.items():
            assert torch.equal(param, value), f"{name} changed: the frozen base must stay frozen"
    finally:
        engine.close()


def test_a_bf16_engine_shares_its_base_only_with_a_trainer_that_computes_in_bf16():
    """A bf16 base is shared with a bf16-autocast trainer (it would cast the weights anyway), which then scores
    the engine's tokens as the engine computed them; an fp32 trainer gets no bf16 base to train on."""
    from harnessrl.training.forward import token_logprobs
    from harnessrl.training.losses import token_weights
    from harnessrl.training.micro_batches import make_micro_batches
    from harnessrl.training.samples import build_samples

    model, tokenizer = tiny.tiny_model()
    model = model.to(torch.bfloat16)
    cpu = torch.device("cpu")
    assert can_share(model, lora=True, device=cpu, compute_dtype=torch.bfloat16)
    assert not can_share(model, lora=True, device=cpu, compute_dtype=None)
    engine = embedded.EmbeddedEngine(model, tokenizer)
    try:
        before = {n: (p, p.detach().clone()) for n, p in model.named_parameters()}
        call = _generate(engine, tokenizer.encode("hello world, the answer is"))
        (sample,) = build_samples([call], "g").samples
        trainer = Trainer(share_frozen_base(engine.model),
                          TrainingConfig(lora=LORA, lr=5e-2, device="cpu", dtype="bfloat16"),
                          publisher=InProcessPublisher(engine))
        assert trainer.autocast_dtype == torch.bfloat16
        assert {p.dtype for p in trainer.model.parameters() if p.requires_grad} == {torch.float32}
        (mb,) = make_micro_batches([sample], token_weights([sample], "token"), 10_000)
        with torch.no_grad():
            scored = token_logprobs(trainer.model, mb, cpu, torch.bfloat16)[0].tolist()
        assert scored == pytest.approx(call.completion_logprobs, abs=0.05)  # bf16 rounding, not a mismatch
        trained = sample.__class__(**{**{f: getattr(sample, f) for f in sample.__slots__}, "advantage": 1.0})
        trainer.step([trained])
        assert trainer.publish() == 1 and engine.version == 1
        after = engine.generate(call.prompt_token_ids, embedded.SamplingParams(max_tokens=6, seed=1, ignore_eos=True),
                                timeout=60)
        assert after.choices[0].logprobs != call.completion_logprobs  # the engine serves the update
        for name, (param, value) in before.items():
            assert param.dtype == torch.bfloat16 and torch.equal(param, value), f"{name} changed"
    finally:
        engine.close()
