"""Building the renderer the gateway uses in ``render_mode = "gateway"``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.gateway.render.config import RenderConfig
from harnessrl.gateway.render.renderer import TemplateRenderer


def load_tokenizer(spec: str) -> Any:
    """A tokenizer for a model spec: a transformers folder, else whatever ``harnessrl.models`` resolves
    (``smollm2``, ``tiny``, a ``.gguf`` file, a hub id in the local cache)."""
    from transformers import AutoTokenizer

    path = Path(spec).expanduser()
    if path.is_dir():
        return AutoTokenizer.from_pretrained(str(path))
    from harnessrl.models import load_tokenizer as load_model_tokenizer

    return load_model_tokenizer(spec)


def create_renderer(config: Any = None, tokenizer: Any = None) -> TemplateRenderer:
    """The gateway's renderer. ``config`` is a :class:`RenderConfig` or any config with a ``render``
    attribute holding one (the gateway's); ``tokenizer`` overrides ``RenderConfig.tokenizer`` (e.g. the
    embedded engine's own tokenizer object, so both sides agree on the vocabulary)."""
    if isinstance(config, RenderConfig):
        render_config = config
    else:
        found = getattr(config, "render", None)
        render_config = found if isinstance(found, RenderConfig) else RenderConfig()
    if tokenizer is None:
        tokenizer = load_tokenizer(render_config.tokenizer)
    return TemplateRenderer(tokenizer, render_config)
