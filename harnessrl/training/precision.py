"""The precision a training step computes in: bf16 autocast where the hardware multiplies bf16 natively.

Autocast keeps fp32 master weights and fp32 optimizer state; only the matmuls (and what autocast lists)
run in bf16. On a GPU that is the field's default. On a CPU with AVX512-BF16 or AMX it is also the faster
choice: the demo's training step took 11.5 s against 24.0 s in fp32 (`benchmarks/demo_train_step.py`,
docs/training.md section 5), with the engine's fp32 logprobs still within approx_kl 1e-3 of the trainer's.
Where bf16 is emulated (older CPUs) it is slower than fp32, so ``auto`` keeps fp32 there.
"""

from __future__ import annotations

import torch

from harnessrl.bf16 import native_bf16

__all__ = ["autocast_dtype", "native_bf16"]


def autocast_dtype(dtype: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a ``[training] dtype`` setting on ``device``; None computes in fp32."""
    if dtype == "bfloat16" or (dtype == "auto" and native_bf16(device)):
        return torch.bfloat16
    return None
