"""LoRA's update added by one fused matmul: the trainer's forward for peft's ``lora.Linear``.

peft computes ``base(x) + B(A(x)) * scaling`` as three passes over the layer's full-width output (B's
matmul, the scaling, the add), and its backward takes one more (the scaling's gradient). At rank 16 those
passes are memory-bound and, in a CPU profile of a ``benchmarks/trainer_throughput.py`` agent step, cost about
as much as the frozen base matmuls themselves. Here ``addmm_`` writes ``(A(x) * scaling) @ B^T`` onto the
base output in place: one pass, with the scaling applied to the rank-r activations. The same function,
rounding aside (``tests/unit/training/test_lora_fused.py``). A layer call this does not cover (dropout, DoRA
and other variants, a LoRA bias, a merged or disabled adapter, several active adapters, peft's extra forward
arguments) runs peft's own forward.
"""

from __future__ import annotations

import types
from typing import Any

import torch


def fuse_lora_linears(model: torch.nn.Module) -> int:
    """Give each plain peft ``lora.Linear`` of ``model`` the fused forward; returns how many."""
    from peft.tuners.lora.layer import Linear

    n = 0
    for module in model.modules():
        if type(module) is Linear and not module.fan_in_fan_out:  # exact type: quantized subclasses differ
            module.forward = types.MethodType(_fused_forward, module)  # peft's own stays on the class
            n += 1
    return n


def _fused_forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    adapters = self.active_adapters
    name = adapters[0] if len(adapters) == 1 else None
    if (args or kwargs or name is None or self.disable_adapters or self.merged or name not in self.lora_A
            or name in self.lora_variant or self.lora_bias.get(name)
            or not isinstance(self.lora_dropout[name], torch.nn.Identity)):
        return type(self).forward(self, x, *args, **kwargs)
    lora_a, lora_b = self.lora_A[name], self.lora_B[name]
    result = self.base_layer(x)
    low = lora_a(self._cast_input_dtype(x, lora_a.weight.dtype)) * self.scaling[name]  # [..., r]
    flat = result.view(-1, result.shape[-1])
    flat.addmm_(low.reshape(-1, low.shape[-1]).to(flat.dtype), lora_b.weight.t().to(flat.dtype))
    return result
