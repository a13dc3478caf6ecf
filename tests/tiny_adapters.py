"""Trained-looking LoRA adapters on the tiny model, and the greedy tokens they produce: what the canary tests
compare an engine's answers against (a version is served by its own weights, not another's)."""

from __future__ import annotations

import torch

from harnessrl.models import tiny_model


def trained_adapter(seed: int) -> torch.nn.Module:
    """A LoRA adapter on the tiny model whose B matrices are random (a fresh adapter would be the base)."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_model()[0], LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.eval()


def greedy(model: torch.nn.Module, prompt: list[int], n: int) -> list[int]:
    """The ``n`` tokens greedy decoding appends to ``prompt``, one full forward per token (no cache)."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(ids).logits[0, -1].argmax().view(1, 1)], dim=1)
    return ids[0, len(prompt):].tolist()
