"""LoRA weight updates: the engine serves exactly what the adapter's peft model computes."""

from __future__ import annotations

import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
from harnessrl.models import tiny_model

from .test_engine import forward_logprobs


def test_lora_folder_then_state_dict_updates(tmp_path):
    trainer_model, tokenizer = tiny_model()
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    policy = get_peft_model(trainer_model, config).eval()
    policy.save_pretrained(str(tmp_path / "adapter"))

    served, _ = tiny_model()  # the engine's own copy of the base weights
    engine = EmbeddedEngine(served, tokenizer, EngineConfig(model="tiny"))
    try:
        prompt = tokenizer.encode("hello world")
        params = SamplingParams(max_tokens=10, seed=3, ignore_eos=True)
        base = engine.generate(prompt, params)
        assert engine.update_weights(lora=tmp_path / "adapter") == 1
        tuned = engine.generate(prompt, params)
        assert tuned.policy_version == 1
        assert tuned.choices[0].logprobs != base.choices[0].logprobs
        ref = forward_logprobs(policy, prompt, tuned.choices[0].token_ids)
        assert max(abs(a - b) for a, b in zip(ref, tuned.choices[0].logprobs, strict=True)) < 1e-4

        with torch.no_grad():  # a "training step" on the adapter, published as a state dict
            for name, p in policy.named_parameters():
                if "lora_B" in name:
                    p.add_(0.1)
        assert engine.update_weights(lora=get_peft_model_state_dict(policy)) == 2
        again = engine.generate(prompt, params)
        ref = forward_logprobs(policy, prompt, again.choices[0].token_ids)
        assert again.policy_version == 2
        assert max(abs(a - b) for a, b in zip(ref, again.choices[0].logprobs, strict=True)) < 1e-4
    finally:
        engine.close()
