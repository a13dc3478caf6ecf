"""Publishing updated weights to the engines that serve the harness.

A ``Publisher`` gets the trainer's model after an update and makes it servable as a new policy version:
``InProcessPublisher`` hands the live module to an engine in the same process (the embedded engine shares
the weights, so publishing is a version bump, not a copy); ``FolderPublisher`` writes a LoRA adapter or a
safetensors model folder that vLLM/SGLang load (LoRA hot-load or reload). The gateway pauses around the
swap; the version and checkpoint path are recorded by ``weights.versions.record_policy_version``. Both
``training/`` (the trainer publishes) and ``engines/`` (vLLM publishers build on ``FolderPublisher``) import
this module, never each other.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from harnessrl.weights.checkpoints import prune_numbered

logger = logging.getLogger(__name__)


@runtime_checkable
class Publisher(Protocol):
    """Makes the trainer's current weights servable as ``version``; returns a loadable path or None."""

    def publish(self, model: torch.nn.Module, version: int) -> str | None: ...


@runtime_checkable
class WeightReceiver(Protocol):
    """What an in-process engine offers (``harnessrl.engines.embedded.EmbeddedEngine.update_weights``).

    It loads a full/partial state dict or a peft adapter state dict between requests and serves the
    result as ``version``.
    """

    def update_weights(
        self,
        state_dict: Mapping[str, torch.Tensor] | None = None,
        *,
        lora: Any = None,
        lora_config: Any = None,
        version: int | None = None,
    ) -> int: ...


def trainable_update(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments for ``WeightReceiver.update_weights`` carrying the trainer's current weights.

    LoRA: the adapter state dict (peft names, a few MB) and its config. Full fine-tuning: every parameter
    under the base model's own names. Tensors are cloned, so later optimizer steps never leak into what
    the engine serves (the engine keeps its own model; sharing would let a half-applied step be sampled).
    """
    if hasattr(model, "peft_config") and hasattr(model, "get_base_model"):
        from peft import get_peft_model_state_dict

        adapter = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
        return {"lora": adapter, "lora_config": model.peft_config["default"]}
    return {"state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()}}


class InProcessPublisher:
    """Hands the updated weights to an engine living in this process (the embedded engine).

    Optionally also writes them to a folder (``folder``) so the stored policy version has a checkpoint
    path that another engine, or a restarted run, can load.
    """

    def __init__(self, engine: WeightReceiver, folder: FolderPublisher | None = None) -> None:
        self.engine = engine
        self.folder = folder

    def publish(self, model: torch.nn.Module, version: int) -> str | None:
        path = self.folder.publish(model, version) if self.folder is not None else None
        self.engine.update_weights(**trainable_update(model), version=version)
        return path


_VERSION = re.compile(r"v(\d{6})")


def prune_published(root: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` version folders ``FolderPublisher`` wrote under ``root``.

    An engine reads a version's folder when it is published (vLLM loads it then) or restarts (the newest),
    so older ones are only history; a full model's is ~0.5 GB for 135M parameters in fp32.
    """
    return prune_numbered(root, _VERSION, keep)


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
