"""The run's one trainer (no ``[policies]``): its model, its publisher, its run directory."""

from __future__ import annotations

import logging
from typing import Any

from harnessrl.config import HarnessConfig
from harnessrl.store import Store

log = logging.getLogger(__name__)


def make_trainer(config: HarnessConfig, store: Store, run_id: str | None, engine: Any, tokenizer: Any,
                  vllm: Any = None) -> Any:
    """One ``Trainer`` on the engine's frozen base when it can be shared (LoRA on CPU), else its own fp32
    copy; it publishes into the embedded engine, to vLLM (``stack/vllm.py``) or to a folder."""
    import torch

    from harnessrl.models import load_model
    from harnessrl.training.shared_base import share_frozen_base, shares_engine_base
    from harnessrl.training.trainer import Trainer
    from harnessrl.weights.publish import FolderPublisher, InProcessPublisher

    if engine is not None and shares_engine_base(engine.model, config.training, config.training.lora is not None):
        model = share_frozen_base(engine.model)  # LoRA on CPU: one copy of the frozen base for both
    else:
        if engine is not None and config.training.lora is not None and engine.model.dtype != torch.float32:
            log.info("the trainer loads its own fp32 copy of the base: the engine serves in %s and training "
                     "computes in fp32 ([training] dtype = %r)", engine.model.dtype, config.training.dtype)
        model, tok = load_model(config.engine.model, dtype="float32")
        tokenizer = tokenizer or tok
    run_dir = config.run_dir
    folder = FolderPublisher(run_dir / "policies", tokenizer=tokenizer)
    publisher: Any = InProcessPublisher(engine) if engine is not None else folder
    if vllm is not None:
        from harnessrl.stack.vllm import make_publisher

        publisher = make_publisher(config, folder, vllm)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    # store=None: the controller records policy versions itself, after the checkpoint that makes them durable.
    return Trainer(model, config.training, run_dir=run_dir, publisher=publisher, store=None, run_id=run_id,
                   pad_token_id=int(pad))
