"""Settings of vLLM engines (``[engine.vllm]``): launch a server or attach to running ones.

Kept apart from ``EngineConfig`` so the embedded engine's settings stay readable; ``EngineConfig.vllm``
holds one of these. The shared settings (model, dtype, seed, context window, served name) stay in
``EngineConfig`` and are passed to vLLM as its own flags.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection


class VllmConfig(ConfigSection):
    """How harnessrl runs or reaches vLLM's OpenAI server. Defaults launch one server on loopback."""

    launch: bool | None = Field(
        None,
        description="True: start a vLLM server for engine.model; False: attach to engine.urls; "
        "None (default): launch when engine.urls is empty, else attach.",
    )
    python: str = Field(
        ".venv-vllm/bin/python",
        description="Python of the virtual environment that has vLLM (scripts/vllm.sh creates .venv-vllm). "
        "Relative paths are resolved from the working directory; HARNESSRL_VLLM_PYTHON overrides it.",
    )
    host: str = Field("127.0.0.1", description="Interface the launched server listens on.")
    port: int = Field(0, ge=0, le=65535, description="Port of the launched server; 0 picks a free one.")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one launched server shards the model over.")
    enable_lora: bool = Field(
        True,
        description="Start with --enable-lora and runtime LoRA updating, so LoRA policies are hot-loaded "
        "(POST /v1/load_lora_adapter) instead of restarting the server.",
    )
    max_lora_rank: int = Field(
        16, ge=1, description="vLLM's --max-lora-rank; raised automatically to training.lora.r when smaller."
    )
    max_loras: int = Field(1, ge=1, description="vLLM's --max-loras (adapters active in one batch).")
    max_model_len: int | None = Field(
        None, description="vLLM's --max-model-len; default: engine.context_window, else vLLM's own default."
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="More command-line flags for the launched server, e.g. ['--enforce-eager'].",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment of the launched server, e.g. {VLLM_CPU_KVCACHE_SPACE = '1'} (GiB "
        "of KV cache on CPU).",
    )
    startup_timeout_s: float = Field(
        900.0, gt=0, description="How long to wait for GET /health after a launch (first start on a CPU: minutes)."
    )
    full_weights: Literal["in_place", "restart"] = Field(
        "in_place",
        description="How full fine-tuning's weights reach the servers. 'in_place' (default): each server "
        "reloads them from the folder the trainer wrote (vLLM's reload_weights through POST /collective_rpc; "
        "launched servers get VLLM_SERVER_DEV_MODE=1, attached ones must be started with it), about a second "
        "for a small model, no restart; 'restart': restart the launched servers on the folder (attached "
        "servers cannot be restarted from here).",
    )
    lora_name_prefix: str = Field(
        "policy-v", description="Published LoRA adapters are loaded as '<prefix><version>'."
    )
