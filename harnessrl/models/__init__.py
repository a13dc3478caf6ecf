"""Locating, preparing and loading policy models, offline.

``prepare_model(spec) -> Path`` turns a config spec (``"smollm2"``, ``"tiny"``, a folder, a ``.gguf`` file or a
hub id) into a local transformers folder; ``load_model(spec)`` loads it; ``tiny_model()`` builds a small random
model in memory for tests.
"""

from __future__ import annotations

from typing import Any

from harnessrl.models.cache import cache_root
from harnessrl.models.prepare import ModelNotFoundError, find_smollm2_gguf, prepare_model
from harnessrl.models.tiny import CHAT_TEMPLATE as TINY_CHAT_TEMPLATE
from harnessrl.models.tiny import tiny_model, tiny_tokenizer

__all__ = [
    "TINY_CHAT_TEMPLATE",
    "ModelNotFoundError",
    "cache_root",
    "find_smollm2_gguf",
    "load_model",
    "load_tokenizer",
    "prepare_model",
    "tiny_model",
    "tiny_tokenizer",
]


def load_tokenizer(spec: str = "smollm2") -> Any:
    """The tokenizer (with chat template) of a model spec, loaded offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(prepare_model(spec)))


def load_model(spec: str = "smollm2", *, dtype: str = "float32") -> tuple[Any, Any]:
    """Return ``(model, tokenizer)`` for a spec: model in eval mode, on CPU, in ``dtype`` (fp32 on CPU)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = prepare_model(spec)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
    model.eval()
    return model, load_tokenizer(str(path))
