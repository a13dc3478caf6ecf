"""Serving a LoRA policy from merged weights: ``W + s B A`` in the engine's own copy of each adapted layer.

peft runs the adapter beside every adapted layer in each decode step: two rank-r matmuls, a scale and an add,
210 times a step for the demo's adapter on SmolLM2-135M. With a couple dozen rows in a step those small
matmuls cost the engine about a fifth of its decode time (``benchmarks/engine_lora.py``). Merged, a step
costs what the bare base costs.

The price is memory: the trainer reads the engine's base weights (``training/shared_base.py``), so they must
stay as they are, and the engine keeps its own copy of each adapted weight (+0.42 GB for SmolLM2-135M in
fp32). Only for fp32 weights: a bf16 weight would round the update's small entries away (bf16 keeps ~3
significant digits). Opt-in (``[engine] lora_serving = "merged"``): per sampled token a demo run's engine took
0.71-0.78x the time merged, but three seeds each way were no shorter (docs/training.md, section 5).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: The model attribute that marks merged weights: the trainer must not take them for the base.
MERGED = "_harnessrl_merged_lora"


def unsupported(model: torch.nn.Module, weights: Mapping[str, torch.Tensor], config: Any) -> str | None:
    """Why this adapter cannot be served merged (peft serves it then), or None when it can."""
    if config is None:
        return "no LoRA config"
    for flag in ("use_dora", "lora_bias", "fan_in_fan_out"):
        if getattr(config, flag, False):
            return f"{flag} is set"
    for extra in ("rank_pattern", "alpha_pattern", "modules_to_save"):
        if getattr(config, extra, None):
            return f"{extra} is set"
    try:
        pairs = _pairs(weights)
    except ValueError as exc:
        return str(exc)
    for name, (a, b) in pairs.items():
        try:
            module = model.get_submodule(name)
        except AttributeError:
            return f"the model has no layer {name}"
        if type(module) is not torch.nn.Linear:
            return f"{name} is a {type(module).__name__}, not a Linear"
        if module.weight.dtype != torch.float32:
            return f"{name} is {module.weight.dtype}, not float32 (merging would round the update away)"
        if a.shape != (config.r, module.in_features) or b.shape != (module.out_features, config.r):
            return f"{name}'s adapter shapes {tuple(a.shape)}, {tuple(b.shape)} do not fit the layer at r={config.r}"
    return None


class MergedLora:
    """The engine's merged adapter: its own weight per adapted layer, rewritten from the base at each update."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.base: dict[str, Any] = {}  # layer -> the base weight (shared with the trainer)

    @property
    def active(self) -> bool:
        return bool(self.base)

    def apply(self, weights: Mapping[str, torch.Tensor], config: Any) -> None:
        """Serve ``weights`` (peft's state dict names): each adapted layer's weight becomes ``W + s B A``.

        Call ``unsupported`` first; the base weights are only read, never written."""
        scale = config.lora_alpha / (math.sqrt(config.r) if getattr(config, "use_rslora", False) else config.r)
        pairs = _pairs(weights)
        stale = set(self.base) - set(pairs)
        for name in stale:  # a layer the new adapter leaves out serves its base again
            self.model.get_submodule(name).weight = self.base.pop(name)
        with torch.no_grad():
            for name, (a, b) in pairs.items():
                module = self.model.get_submodule(name)
                if name not in self.base:
                    self.base[name] = module.weight
                    module.weight = torch.nn.Parameter(torch.empty_like(self.base[name]), requires_grad=False)
                base, own = self.base[name], module.weight
                assert isinstance(own, torch.Tensor)
                torch.addmm(base, b.to(base), a.to(base), alpha=scale, out=own)
        setattr(self.model, MERGED, True)

    def restore(self) -> None:
        """Put the base weights back (before peft wraps the model) and free the merged copies."""
        for name, base in self.base.items():
            self.model.get_submodule(name).weight = base
        self.base.clear()
        if hasattr(self.model, MERGED):
            delattr(self.model, MERGED)


def _pairs(weights: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Layer name -> (A, B) from a peft adapter state dict (``base_model.model.<layer>.lora_A.weight``)."""
    found: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in weights.items():
        for part in ("lora_A", "lora_B"):
            suffix = f".{part}.weight"
            if key.endswith(suffix):
                name = key[: -len(suffix)].removeprefix("base_model.model.")
                found.setdefault(name, {})[part] = tensor
                break
        else:
            raise ValueError(f"adapter weight {key} is not a LoRA A or B matrix")
    missing = [n for n, ab in found.items() if len(ab) != 2]
    if missing:
        raise ValueError(f"adapter lacks an A or B matrix for {missing[:3]}")
    return {n: (ab["lora_A"], ab["lora_B"]) for n, ab in found.items()}
