"""The fused LoRA forward computes what peft's does: outputs and adapter gradients, and peft's own path
wherever the fused one does not apply."""

from __future__ import annotations

import copy

import torch
from peft import LoraConfig, get_peft_model

from harnessrl.training.lora_fused import fuse_lora_linears

from ._helpers import VOCAB, tiny_llama

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora_model(dropout: float = 0.0) -> torch.nn.Module:
    model = get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules=TARGETS))
    torch.manual_seed(1)
    with torch.no_grad():  # B starts at zero, which would hide the update: give it values
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    return model


def _loss_and_grads(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids).logits
    loss = torch.log_softmax(logits, -1)[..., 3].mean()
    loss.backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_fused_forward_and_gradients_equal_peft():
    peft_model = _lora_model()
    fused = copy.deepcopy(peft_model)
    assert fuse_lora_linears(fused) == 2 * len(TARGETS)  # every target of both layers
    ids = torch.randint(0, VOCAB, (2, 11), generator=torch.Generator().manual_seed(0))
    want_logits, want = _loss_and_grads(peft_model, ids)
    got_logits, got = _loss_and_grads(fused, ids)
    assert torch.allclose(got_logits, want_logits, atol=1e-5)
    assert want.keys() == got.keys() and len(want) == 4 * len(TARGETS)
    for name in want:
        assert torch.allclose(got[name], want[name], atol=1e-6, rtol=1e-4), name
    peft_model.eval()
    fused.eval()
    with torch.no_grad(), fused.disable_adapter():  # the adapter changes the output: the fused path added it
        base_logits = fused(input_ids=ids).logits
    assert not torch.allclose(base_logits, got_logits, atol=1e-3)
    with peft_model.disable_adapter(), torch.no_grad():
        assert torch.allclose(peft_model(input_ids=ids).logits, base_logits, atol=1e-6)


def test_a_base_weight_that_trains_gets_its_gradient():
    """The merged path computes no gradient for the base; a base left trainable takes the addmm_ path."""
    peft_model = _lora_model()
    peft_model.get_base_model().model.layers[0].mlp.up_proj.base_layer.weight.requires_grad_(True)
    fused = copy.deepcopy(peft_model)
    fuse_lora_linears(fused)
    ids = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(4))
    _, want = _loss_and_grads(peft_model, ids)
    _, got = _loss_and_grads(fused, ids)
    base = [n for n in want if "up_proj.base_layer.weight" in n]
    assert len(base) == 1 and want.keys() == got.keys()
    for name in want:
        assert torch.allclose(got[name], want[name], atol=1e-6, rtol=1e-4), name


def test_layers_the_fused_path_does_not_cover_run_peft(monkeypatch):
    from peft.tuners.lora.layer import Linear

    calls = []
    real = Linear.forward
    monkeypatch.setattr(Linear, "forward", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(2))
    model = _lora_model(dropout=0.1)  # dropout: peft's forward
    fuse_lora_linears(model)
    model(input_ids=ids)
    assert len(calls) == 2 * len(TARGETS)
    calls.clear()
    model = _lora_model()
    fuse_lora_linears(model)
    model(input_ids=ids)
    assert calls == []  # the fused path, for every layer
    model.merge_adapter()  # merged: peft's forward (the base alone, which now holds the adapter)
    merged = model(input_ids=ids).logits
    assert len(calls) == 2 * len(TARGETS)
    model.unmerge_adapter()
    calls.clear()
    assert torch.allclose(model(input_ids=ids).logits, merged, atol=1e-5) and calls == []


def test_fused_forward_under_bf16_autocast_matches_peft():
    peft_model = _lora_model()
    fused = copy.deepcopy(peft_model)
    fuse_lora_linears(fused)
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        want = peft_model(input_ids=ids).logits.float()
        got = fused(input_ids=ids).logits.float()
    assert torch.allclose(got, want, atol=5e-2)
