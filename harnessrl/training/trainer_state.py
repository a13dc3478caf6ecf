"""What one checkpoint folder holds and how the trainer writes and reads it back, so a killed run continues
exactly where it stopped. (Where those folders live, one per trained step, and which is the latest:
``harnessrl/weights/checkpoints.py``.)

A checkpoint holds the *trainable* parameters (the adapter for LoRA, everything for full fine-tuning; the
frozen base is reloaded from its own folder), the optimizer state, the step and policy version, and every
RNG state, so resuming gives the same next step as an uninterrupted run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "trainable.safetensors"
OPTIMIZER = "optimizer.pt"
STATE = "trainer_state.json"
RNG = "rng.pt"


class CheckpointError(RuntimeError):
    """The checkpoint does not match the model (different LoRA targets or architecture?)."""


def save_checkpoint(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], *, tensors: dict[str, torch.Tensor] | None = None,
                    optimizer_state: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint; FSDP passes the gathered trainable ``tensors`` and ``optimizer_state``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if tensors is None:
        tensors = {n: p.detach().to("cpu") for n, p in model.named_parameters() if p.requires_grad}
    tensors = {n: t.contiguous() for n, t in tensors.items()}
    save_file(tensors, str(path / WEIGHTS))
    torch.save(optimizer_state if optimizer_state is not None else optimizer.state_dict(), path / OPTIMIZER)
    rng = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, path / RNG)
    (path / STATE).write_text(json.dumps(state, indent=2, sort_keys=True))
    return path


def load_checkpoint(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    load_state: Callable[[dict[str, torch.Tensor], dict[str, Any]], None] | None = None,
                    ) -> dict[str, Any]:
    """Restore weights, optimizer and RNGs in place; returns the saved trainer state (step, version, ...).

    ``load_state(tensors, optimizer_state)`` replaces the in-place copy (FSDP: each rank keeps its shard).
    """
    path = Path(path)
    if not (path / STATE).is_file():
        raise CheckpointError(f"{path} is not a harnessrl checkpoint (no {STATE})")
    tensors = load_file(str(path / WEIGHTS))
    params = dict(model.named_parameters())
    expected = {n for n, p in params.items() if p.requires_grad}
    if set(tensors) != expected:
        missing, extra = sorted(expected - set(tensors))[:3], sorted(set(tensors) - expected)[:3]
        raise CheckpointError(
            f"checkpoint {path} does not match the model: missing {missing}, unexpected {extra}; "
            "load it with the same model and LoRA settings it was saved with"
        )
    optimizer_state = torch.load(path / OPTIMIZER, map_location="cpu", weights_only=False)
    if load_state is not None:
        load_state(tensors, optimizer_state)
    else:
        with torch.no_grad():
            for name, value in tensors.items():
                params[name].copy_(value.to(params[name].device, params[name].dtype))
        optimizer.load_state_dict(optimizer_state)
    rng = torch.load(path / RNG, weights_only=False)
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return json.loads((path / STATE).read_text())
