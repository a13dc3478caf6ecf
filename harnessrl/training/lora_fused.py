"""LoRA layers computed with fewer passes over their activations: the trainer's forward for peft's ``lora.Linear``.

peft computes ``base(x) + B(A(x)) * scaling`` as three passes over the layer's full-width output (B's
matmul, the scaling, the add), and its backward takes more (the scaling's gradient, adding the adapter's
input gradient to the base's). At rank 16 those passes are memory-bound and, in a CPU profile of a
``benchmarks/trainer_throughput.py`` agent step, cost about as much as the frozen base matmuls themselves.

- Without autocast, over a frozen base (fp32 on a CPU without native bf16; one dtype): ``x @ (W + s B A)^T``, the
  adapter merged into a temporary weight for one matmul, and in the backward ``dy @ (W + s B A)`` for the
  input's gradient (the merged weight recomputed, not kept); the adapters' gradients from rank-r products.
- Otherwise (under autocast, or a base that trains too): ``addmm_`` writes ``(A(x) * s) @ B^T`` onto the base output in place.

The same function, rounding aside (``tests/unit/training/test_lora_fused.py``). A layer call neither covers
(dropout, DoRA and other variants, a LoRA bias, a merged or disabled adapter, several active adapters, peft's
extra forward arguments) runs peft's own forward.
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F


def fuse_lora_linears(model: torch.nn.Module) -> int:
    """Give each plain peft ``lora.Linear`` of ``model`` the fused forward; returns how many."""
    from peft.tuners.lora.layer import Linear

    n = 0
    for module in model.modules():
        if type(module) is Linear and not module.fan_in_fan_out:  # exact type: quantized subclasses differ
            # an instance attribute: peft's own forward stays on the class (the fallback calls it)
            module.forward = types.MethodType(_fused_forward, module)  # type: ignore[method-assign]
            n += 1
    return n


def _fused_forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    adapters = self.active_adapters
    name = adapters[0] if len(adapters) == 1 else None
    if (args or kwargs or name is None or self.disable_adapters or self.merged or name not in self.lora_A
            or name in getattr(self, "lora_variant", {}) or getattr(self, "lora_bias", {}).get(name)
            or not isinstance(self.lora_dropout[name], torch.nn.Identity)):
        return type(self).forward(self, x, *args, **kwargs)
    lora_a, lora_b, base = self.lora_A[name].weight, self.lora_B[name].weight, self.base_layer
    frozen = not base.weight.requires_grad and (base.bias is None or not base.bias.requires_grad)
    if (type(base) is torch.nn.Linear and frozen and not torch.is_autocast_enabled(x.device.type)
            and x.dtype == base.weight.dtype == lora_a.dtype == lora_b.dtype):
        return _MergedLoRA.apply(x, base.weight, base.bias, lora_a, lora_b, float(self.scaling[name]))
    result = base(x)
    low = F.linear(x.to(lora_a.dtype), lora_a) * self.scaling[name]  # [..., r], as peft casts the input
    flat = result.view(-1, result.shape[-1])
    flat.addmm_(low.reshape(-1, low.shape[-1]).to(flat.dtype), lora_b.t().to(flat.dtype))
    return result


class _MergedLoRA(torch.autograd.Function):
    """``y = x (W + s B A)^T + bias``; gradients for x (when it needs one), A and B, never W or the bias."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scaling: float) -> torch.Tensor:
        ctx.save_for_backward(x, weight, lora_a, lora_b)
        ctx.scaling = scaling
        # built as [in, out]: x @ W'^T with W'^T contiguous ran 14% faster than F.linear's transposed operand
        # for the 576 -> 1536 projections of SmolLM2 on a CPU (and no slower for the others)
        merged_t = torch.addmm(weight.t(), lora_a.t(), lora_b.t(), alpha=scaling)
        y = x @ merged_t
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, lora_a, lora_b = ctx.saved_tensors
        s = ctx.scaling
        dy = grad.reshape(-1, grad.shape[-1])
        flat_x = x.reshape(-1, x.shape[-1])
        dx = None
        if ctx.needs_input_grad[0]:
            dx = (dy @ torch.addmm(weight, lora_b, lora_a, alpha=s)).view(x.shape)
        d_a = d_b = None
        if ctx.needs_input_grad[3]:
            d_a = (dy @ lora_b).t() @ flat_x * s  # [r, in]
        if ctx.needs_input_grad[4]:
            d_b = dy.t() @ (flat_x @ lora_a.t()) * s  # [out, r]
        return dx, None, None, d_a, d_b, None
