"""A LoRA policy served merged into the engine's own weights (``[engine] lora_serving = "merged"``).

Merged serving must sample exactly what peft's adapter-beside-the-layer serving samples, never write the base
weights the trainer shares, refuse what merging does not fit (DoRA) with the reason, and give the model back
to peft when named adapters (several policies) join."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
from harnessrl.models import tiny_model
from harnessrl.training.shared_base import can_share, share_frozen_base

from .test_engine import forward_logprobs

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _policy(seed: int, **extra: object) -> tuple[torch.nn.Module, dict[str, torch.Tensor], LoraConfig]:
    model, _ = tiny_model()
    config = LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, **extra)  # type: ignore[arg-type]
    policy = get_peft_model(model, config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return policy, get_peft_model_state_dict(policy), config


def _engine(mode: str) -> EmbeddedEngine:
    model, tok = tiny_model()
    return EmbeddedEngine(model, tok, EngineConfig(model="tiny", lora_serving=mode))  # type: ignore[arg-type]


def test_merged_samples_what_peft_samples_and_never_writes_the_shared_base() -> None:
    merged, adapter = _engine("merged"), _engine("adapter")
    try:
        trainer = share_frozen_base(merged.model)  # what a LoRA trainer on the CPU holds: the same tensors
        before = {n: p.detach().clone() for n, p in trainer.named_parameters()}
        prompt = merged.tokenizer.encode("hello world")
        params = SamplingParams(max_tokens=12, seed=3, ignore_eos=True)
        for seed in (1, 2):  # two updates: the second rewrites the merged copy from the base, not on top
            policy, weights, config = _policy(seed)
            merged.update_weights(lora=weights, lora_config=config)
            adapter.update_weights(lora=weights, lora_config=config)
            a = merged.generate(prompt, params).choices[0]
            b = adapter.generate(prompt, params).choices[0]
            assert a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
            ref = forward_logprobs(policy, prompt, a.token_ids)
            assert max(abs(x - y) for x, y in zip(ref, a.logprobs, strict=True)) < 1e-4
        assert not hasattr(merged.model, "peft_config") and hasattr(adapter.model, "peft_config")
        q = merged.model.get_submodule("model.layers.0.self_attn.q_proj")
        assert q.weight.data_ptr() != trainer.get_submodule("model.layers.0.self_attn.q_proj").weight.data_ptr()
        for n, p in trainer.named_parameters():  # the trainer's base is the base still
            assert torch.equal(p, before[n]), n
        assert not can_share(merged.model, lora=True, device=torch.device("cpu"))  # merged is not a base
    finally:
        merged.close()
        adapter.close()


def test_what_merging_does_not_cover_is_refused_with_the_reason_and_adapter_serving_is_the_default() -> None:
    _, weights, config = _policy(1, use_dora=True)
    forced = _engine("merged")
    try:
        with pytest.raises(ValueError, match="use_dora"):
            forced.update_weights(lora=weights, lora_config=config)
        assert forced.version == 0  # refused before the pause: nothing served changed
    finally:
        forced.close()
    assert EngineConfig().lora_serving == "adapter"
    default = _engine("adapter")
    try:
        default.update_weights(lora=weights, lora_config=config)
        assert hasattr(default.model, "peft_config")  # served beside the layers, DoRA included
    finally:
        default.close()


def test_named_adapters_after_a_merged_policy_get_the_bare_base_and_the_policy_is_unchanged() -> None:
    eng = _engine("merged")
    try:
        _, weights, config = _policy(1)
        eng.update_weights(lora=weights, lora_config=config)
        prompt = eng.tokenizer.encode("hello world")
        params = SamplingParams(max_tokens=10, seed=5, ignore_eos=True)
        merged = eng.generate(prompt, params).choices[0]
        eng.register_adapters(["judge"])  # several policies: peft beside the layers from now on
        assert hasattr(eng.model, "peft_config")
        again = eng.generate(prompt, params).choices[0]
        assert again.token_ids == merged.token_ids
        assert max(abs(x - y) for x, y in zip(again.logprobs, merged.logprobs, strict=True)) < 1e-4
        bare, _ = tiny_model()
        base_q = eng.model.get_submodule("base_model.model.model.layers.0.self_attn.q_proj.base_layer")
        assert torch.equal(base_q.weight, bare.get_submodule("model.layers.0.self_attn.q_proj").weight)
    finally:
        eng.close()
