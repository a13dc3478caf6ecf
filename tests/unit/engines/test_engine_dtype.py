"""``[engine] dtype = "auto"``: bf16 only where the CPU multiplies bf16 natively, and the engine loads in it."""

from __future__ import annotations

import pytest
import torch

from harnessrl import bf16
from harnessrl.engines.config import EngineConfig

embedded = pytest.importorskip("harnessrl.engines.embedded")


@pytest.mark.parametrize("native, expected", [(True, "bfloat16"), (False, "float32")])
def test_auto_is_bf16_only_on_a_cpu_with_native_bf16(monkeypatch, native, expected):
    monkeypatch.setattr(bf16, "native_bf16", lambda device: native)
    assert EngineConfig(dtype="auto").embedded_dtype() == expected
    assert EngineConfig(dtype="float32").embedded_dtype() == "float32"  # an explicit dtype is kept
    assert EngineConfig(dtype="bfloat16").embedded_dtype() == "bfloat16"


def test_an_engine_built_from_config_serves_in_the_resolved_dtype(monkeypatch):
    monkeypatch.setattr(bf16, "native_bf16", lambda device: True)
    engine = embedded.EmbeddedEngine.from_config(EngineConfig(model="tiny", dtype="auto"))
    try:
        assert {p.dtype for p in engine.model.parameters()} == {torch.bfloat16}
        out = engine.generate([1, 2, 3, 4], embedded.SamplingParams(max_tokens=4, seed=0, ignore_eos=True), timeout=60)
        assert len(out.choices[0].token_ids) == 4
        assert all(lp <= 0.0 for lp in out.choices[0].logprobs)
    finally:
        engine.close()


def test_an_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match="dtype"):
        EngineConfig(dtype="int8")
