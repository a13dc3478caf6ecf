"""Applying new weights to the engine's model in place: full state dicts and peft LoRA adapters."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)


def load_full_state_dict(model: Any, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Copy ``state_dict`` into the model's parameters (partial dicts allowed, unknown names refused)."""
    result = model.load_state_dict(dict(state_dict), strict=False)
    if result.unexpected_keys:
        raise ValueError(
            f"state_dict has {len(result.unexpected_keys)} names the model does not know, e.g. "
            f"{result.unexpected_keys[:3]}; send the model's own parameter names"
        )
    if result.missing_keys:
        logger.info("partial weight update: %d parameters kept", len(result.missing_keys))


def apply_lora(model: Any, lora: str | Path | Mapping[str, torch.Tensor], lora_config: Any = None,
               adapter_name: str = "default") -> Any:
    """Return the model with the adapter's weights loaded (wrapping it with peft the first time).

    ``adapter_name``: several adapters live side by side on one base (one per policy); each is added the
    first time its name is seen and replaced afterwards."""
    from peft import PeftModel, get_peft_model, set_peft_model_state_dict

    weights, config = read_lora(lora, lora_config)
    if not isinstance(model, PeftModel):
        if config is None:
            raise ValueError("the first LoRA update needs lora_config= (a peft LoraConfig or dict)")
        config.inference_mode = True  # on our copy: the trainer's config object stays untouched
        model = get_peft_model(model, config, adapter_name=adapter_name)
        model.eval()
    elif adapter_name not in model.peft_config:
        if config is None:
            raise ValueError(f"the first update of adapter {adapter_name!r} needs lora_config=")
        config.inference_mode = True
        model.add_adapter(adapter_name, config)
        model.eval()
    result = set_peft_model_state_dict(model, weights, adapter_name=adapter_name)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise ValueError(f"adapter has weights the model does not know, e.g. {unexpected[:3]}")
    return model


def read_lora(lora: str | Path | Mapping[str, torch.Tensor], lora_config: Any = None) -> tuple[dict[str, torch.Tensor], Any]:
    """An adapter's weights (peft's state dict names) and its peft ``LoraConfig`` (None when a state dict
    came without one): from a folder, or from a state dict plus a config object or dict (copied, so the
    trainer's own config object is never changed)."""
    from peft import LoraConfig

    if isinstance(lora, str | Path):
        folder = Path(lora)
        return _read_adapter(folder), LoraConfig.from_pretrained(str(folder))
    config = LoraConfig(**lora_config) if isinstance(lora_config, dict) else copy.deepcopy(lora_config)
    return dict(lora), config


def _read_adapter(folder: Path) -> dict[str, torch.Tensor]:
    st = folder / "adapter_model.safetensors"
    if st.is_file():
        from safetensors.torch import load_file

        return load_file(str(st))
    bin_ = folder / "adapter_model.bin"
    if bin_.is_file():
        return torch.load(str(bin_), map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no adapter_model.safetensors or adapter_model.bin in {folder}")
