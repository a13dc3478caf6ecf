"""Publishing updated weights to the engines that serve the harness.

A ``Publisher`` gets the trainer's model after an update and makes it servable as a new policy version:
``InProcessPublisher`` hands the live module to an engine in the same process (the embedded engine shares
the weights, so publishing is a version bump, not a copy); ``FolderPublisher`` writes a LoRA adapter or a
safetensors model folder that vLLM/SGLang load (LoRA hot-load or reload). The gateway pauses around the
swap; the trainer records the version and checkpoint path in the store.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

logger = logging.getLogger(__name__)


@runtime_checkable
class Publisher(Protocol):
    """Makes the trainer's current weights servable as ``version``; returns a loadable path or None."""

    def publish(self, model: torch.nn.Module, version: int) -> str | None: ...


@runtime_checkable
class WeightReceiver(Protocol):
    """What an in-process engine offers (the embedded engine): take new weights, serve them as ``version``."""

    def update_weights(self, model: torch.nn.Module, version: int) -> Any: ...


class InProcessPublisher:
    """Hands the updated module to an engine living in this process.

    The engine decides whether it shares the module (no copy) or copies its state; either way requests
    served after ``update_weights`` returns carry the new policy version.
    """

    def __init__(self, engine: WeightReceiver, folder: FolderPublisher | None = None) -> None:
        self.engine = engine
        self.folder = folder

    def publish(self, model: torch.nn.Module, version: int) -> str | None:
        path = self.folder.publish(model, version) if self.folder is not None else None
        self.engine.update_weights(model, version=version)
        return path


class FolderPublisher:
    """Writes ``<root>/v<version>``: a peft adapter folder for LoRA, else a full safetensors model folder."""

    def __init__(self, root: str | Path, tokenizer: Any | None = None) -> None:
        self.root = Path(root)
        self.tokenizer = tokenizer

    def publish(self, model: torch.nn.Module, version: int) -> str:
        path = self.root / f"v{version:06d}"
        path.mkdir(parents=True, exist_ok=True)
        save = getattr(model, "save_pretrained", None)
        if not callable(save):
            raise TypeError(f"{type(model).__name__} has no save_pretrained; publish a transformers/peft model")
        save(str(path), safe_serialization=True)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(path))
        logger.info("published policy version %d to %s", version, path)
        return str(path)
