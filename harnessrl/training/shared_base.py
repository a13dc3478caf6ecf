"""A trainer model that shares the serving model's frozen base weights (LoRA in one process).

Under LoRA the base weights never change, so the embedded engine and the trainer can read the same
tensors: the trainer gets a structural copy of the engine's module tree whose parameters and buffers *are*
the engine's (same storage), and peft then injects its adapter into the copy only. For SmolLM2-135M in
fp32 that is 540 MB not held twice. Each side keeps its own modules, configs and adapter, so the engine
still serves exactly what was published (its own adapter copy), never a half-applied optimizer step.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from harnessrl.training.config import TrainingConfig
from harnessrl.training.precision import autocast_dtype


def frozen_base_dtypes(compute_dtype: torch.dtype | None) -> set[torch.dtype]:
    """The dtypes a frozen (LoRA) base may keep in the trainer: fp32, and bf16 when the trainer computes in
    bf16 anyway (its autocast dtype), as a bf16 engine's shared base is."""
    return {torch.float32} | ({torch.bfloat16} if compute_dtype == torch.bfloat16 else set())


def share_frozen_base(model: torch.nn.Module) -> Any:
    """A copy of ``model``'s modules that reuses its parameters and buffers (no tensor is copied)."""
    memo: dict[int, Any] = {id(t): t for t in model.parameters()}
    memo.update({id(t): t for t in model.buffers()})
    return copy.deepcopy(model, memo)


def can_share(engine_model: torch.nn.Module, lora: bool, device: torch.device,
              compute_dtype: torch.dtype | None = None) -> bool:
    """Sharing is sound when the trainer freezes the base (LoRA) and wants it where and as the engine has it:
    fp32 on the same device, or bf16 when the trainer computes in bf16 anyway (``compute_dtype``, its
    autocast dtype). On a bf16 base the trainer then computes as the bf16 engine that sampled the tokens does
    (bf16 weights and activations); the adapter and its optimizer state stay fp32."""
    if not lora or hasattr(engine_model, "peft_config") or getattr(engine_model, "_harnessrl_merged_lora", False):
        return False  # full fine-tuning writes the weights; a wrapped or merged engine model holds its adapter
    params = list(engine_model.parameters())
    allowed = frozen_base_dtypes(compute_dtype)
    return bool(params) and all(p.dtype in allowed and p.device == device for p in params)


def shares_engine_base(engine_model: torch.nn.Module, training: TrainingConfig, lora: bool) -> bool:
    """Whether a trainer in this process reads the embedded engine's base: LoRA, training on the CPU the
    engine serves from, in a dtype it computes with (``can_share``)."""
    cpu = torch.device("cpu")
    return training.device in ("auto", "cpu") and not torch.cuda.is_available() \
        and can_share(engine_model, lora, cpu, autocast_dtype(training.dtype, cpu))
