"""Whether a device multiplies bf16 natively: the trainer's autocast and the engine's dtype both ask.

Where bf16 is emulated (CPUs without AVX512-BF16 or AMX) it is slower than fp32, so ``auto`` settings
choose bf16 only where this says yes.
"""

from __future__ import annotations

import torch


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` runs bf16 matmuls in hardware (CUDA with bf16, or a CPU with AVX512-BF16/AMX)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        cpu = torch.cpu
        return bool(cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
    return False
