"""`[training] dtype`: `auto` computes in bf16 only where the hardware multiplies bf16 natively."""

from __future__ import annotations

import pytest
import torch

from harnessrl.training import precision
from harnessrl.training.precision import autocast_dtype, native_bf16

CPU = torch.device("cpu")


@pytest.mark.parametrize(("avx512_bf16", "amx", "expected"), [
    (True, False, torch.bfloat16), (False, True, torch.bfloat16), (False, False, None)])
def test_auto_on_cpu_follows_native_bf16(monkeypatch, avx512_bf16: bool, amx: bool,
                                         expected: torch.dtype | None) -> None:
    monkeypatch.setattr(precision.torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(precision.torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert native_bf16(CPU) is (expected is not None)
    assert autocast_dtype("auto", CPU) is expected


def test_explicit_settings_win_over_the_hardware() -> None:
    assert autocast_dtype("float32", CPU) is None
    assert autocast_dtype("bfloat16", CPU) is torch.bfloat16


@pytest.mark.parametrize("native", [True, False])
def test_the_trainer_takes_autos_choice(monkeypatch, native: bool) -> None:
    from harnessrl.training.config import TrainingConfig
    from harnessrl.training.trainer import Trainer

    from ._helpers import tiny_llama

    monkeypatch.setattr(precision, "native_bf16", lambda device: native)
    trainer = Trainer(tiny_llama(), TrainingConfig(device="cpu", lora=None))
    assert trainer.autocast_dtype is (torch.bfloat16 if native else None)


@pytest.mark.parametrize("native", [True, False])
def test_the_cpu_line_says_whether_bf16_is_native(monkeypatch, native: bool) -> None:
    """What benchmarks print first: the CPU's name, its cores and the answer the dtype choices above use."""
    import os

    from harnessrl.bf16 import cpu_line

    monkeypatch.setattr(precision.torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(precision.torch.cpu, "_is_amx_tile_supported", lambda: False)
    line = cpu_line()
    assert f", {os.cpu_count()} cores (" in line
    assert line.endswith("native bf16" if native else "no native bf16, fp32")
