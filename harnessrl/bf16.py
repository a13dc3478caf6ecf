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


def cpu_line() -> str:
    """The CPU a figure was measured on, as our measurements name it: times differ about 2x between CPUs that
    multiply bf16 natively and those that do not, so a published figure says which it was."""
    import os
    import platform

    name = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:  # not Linux: the name platform gives, and torch's answer below
        pass
    native = native_bf16(torch.device("cpu"))
    isa = ", ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags) or "flags unknown"
    return f"{name}, {os.cpu_count()} cores ({isa}): {'native bf16' if native else 'no native bf16, fp32'}"
