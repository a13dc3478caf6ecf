"""``[training] compile``: each decoder layer of the trainer's model through ``torch.compile``.

A step's matmuls already run at the CPU's peak (docs/measurements.md, the trainer against TRL); what is
left is the elementwise work around them (norms, the gated activation, rotary, residual adds), one pass
over memory per op in eager mode. Compiling a whole decoder layer fuses those passes: for SmolLM2-135M
with LoRA in fp32 on a CPU, 268-273 -> 293-310 tokens per CPU-second (the same loss to the last digit),
after a first step that took 38-40 CPU-s longer (``benchmarks/trainer_throughput.py --compile``). Dynamic
shapes, so that micro-batches of every length share the graphs compiled in the first step; the attention
between them runs eager (its per-sequence split is a graph break). The engine is untouched: it keeps its
own modules (``shared_base.py`` shares tensors, not modules).
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


def decoder_layer_names(model: torch.nn.Module) -> set[str]:
    """The class names transformers gives a model's repeated blocks (``_no_split_modules``)."""
    for module in model.modules():
        names = getattr(module, "_no_split_modules", None)
        if names:
            return set(names)
    return set()


def compile_layers(model: torch.nn.Module, *, distributed: bool = False) -> int:
    """Compile ``model``'s decoder layers in place; returns how many (0, with the reason logged, when the
    model names none or training is distributed, where FSDP wraps the layers itself)."""
    if distributed:
        logger.warning("[training] compile is not applied under FSDP (several processes): training runs eager")
        return 0
    names = decoder_layer_names(model)
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        logger.warning("[training] compile: %s names no decoder layer class (_no_split_modules); training "
                       "runs eager", type(model).__name__)
        return 0
    for layer in layers:
        layer.compile(dynamic=True)
    logger.info("[training] compile: %d %s layers compile on the first step (a one-time cost)", len(layers),
                "/".join(sorted(names)))
    return len(layers)
