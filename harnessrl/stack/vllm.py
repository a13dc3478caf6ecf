"""How the run's stack runs vLLM engines: start, pick a publisher, wire the gateway.

Kept here so the stack only calls three functions: ``start_engine`` before the gateway starts,
``make_publisher`` when the trainer is built, ``attach_gateway`` once the gateway listens.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from harnessrl.engines.vllm import VllmEngine
from harnessrl.engines.vllm_publish import VllmInPlacePublisher, VllmLoraPublisher, VllmReloadPublisher
from harnessrl.weights.publish import FolderPublisher

if TYPE_CHECKING:
    from harnessrl.config import HarnessConfig

log = logging.getLogger(__name__)


def start_engine(config: HarnessConfig) -> VllmEngine:
    """Launch (or reach) the vLLM servers of ``config.engine``; returns the started ``VllmEngine``."""
    lora = config.training.lora
    in_place = lora is None and config.engine.vllm.full_weights == "in_place"
    engine = VllmEngine(config.engine, log_dir=config.run_dir / "logs",
                        lora_rank_min=lora.r if lora is not None else 0, in_place_updates=in_place)
    return engine.start()


def gateway_overrides(config: HarnessConfig, engine: VllmEngine) -> dict[str, Any]:
    """GatewayConfig fields for a launched vLLM: its served name, and render with its own tokenizer."""
    if not engine.launched:
        return {}
    out: dict[str, Any] = {}
    if config.gateway.engine_model is None:
        out["engine_model"] = engine.served_name
    out["render"] = config.gateway.render.model_copy(update={"tokenizer": config.engine.model})
    return out


def make_publisher(config: HarnessConfig, folder: FolderPublisher, engine: VllmEngine) -> Any:
    """LoRA training: hot-load adapters on every engine; full fine-tuning: reload the saved folder in place
    (or restart the launched servers on it, ``[engine.vllm] full_weights = "restart"``)."""
    if config.training.lora is not None:
        if not config.engine.vllm.enable_lora:
            raise ValueError("training.lora is set but engine.vllm.enable_lora = false: vLLM could not load "
                             "the adapters; enable it (or train full weights)")
        return VllmLoraPublisher(folder, engine.urls, name_prefix=config.engine.vllm.lora_name_prefix,
                                 keep_old=config.engine.on_update == "keep")
    if config.engine.vllm.full_weights == "in_place":
        return VllmInPlacePublisher(folder, engine.urls)
    return VllmReloadPublisher(folder, engine)


def attach_gateway(publisher: Any, url: str, admin_token: str) -> None:
    """Let a vLLM publisher switch the gateway's upstream model after each publish."""
    if hasattr(publisher, "attach_gateway"):
        publisher.attach_gateway(url, admin_token)
