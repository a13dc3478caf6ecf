"""Engine configuration: which engine serves the policy and how the embedded one behaves."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection
from harnessrl.engines.vllm_config import VllmConfig


class EngineConfig(ConfigSection):
    """How the policy is served. The defaults run SmolLM2-135M in-process on a laptop CPU."""

    kind: Literal["embedded", "vllm", "sglang", "openai"] = Field(
        "embedded",
        description="embedded: in-process PyTorch engine; vllm: launch a vLLM OpenAI server (or attach to "
        "`urls`, see [engine.vllm]); sglang: attach to SGLang servers at `urls` (docs/vllm.md); openai: any "
        "OpenAI-compatible server at `urls` (no token IDs unless it returns them).",
    )
    urls: list[str] = Field(
        default_factory=list,
        description="Base URLs (ending in /v1) of external engines, for kind vllm/openai.",
    )
    model: str = Field(
        "smollm2",
        description="Model spec: 'smollm2' (packaged SmolLM2-135M-Instruct), 'tiny' (random test model), a local "
        "transformers folder, a .gguf file, or a hub id (only when a hub is reachable or cached).",
    )
    served_model_name: str | None = Field(
        None, description="Name reported by /v1/models; defaults to the model spec."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "float32",
        description="Weights, KV cache and compute dtype of the embedded engine. auto: bfloat16 on a CPU that "
        "multiplies bf16 natively (AVX512-BF16 or AMX; half the memory, prefill about 4x faster), float32 "
        "elsewhere (emulated bf16 is slower). vLLM gets the value as its --dtype.",
    )
    lora_serving: Literal["adapter", "merged"] = Field(
        "adapter", description="How the embedded engine serves a LoRA policy. adapter: peft runs the adapter "
        "beside each adapted layer. merged: each adapted layer's weight becomes W + s B A in the engine's own "
        "copy, so a decode step costs what the bare base costs (24 concurrent generations in fp32: 0.77x the "
        "time), for +0.42 GB with SmolLM2-135M in fp32 (the base stays shared with the trainer). float32 weights "
        "only (bf16 would round the update's small entries away); not with DoRA, per-layer ranks or several "
        "named adapters. Not the default: demo runs in fp32 were no shorter merged (docs/training.md, section 5)."
    )
    max_batch: int = Field(
        8, ge=1, description="Most sequences decoded together in one step; more requests wait in a queue."
    )
    max_waiting: int = Field(
        1024, ge=1, description="Requests queued beyond this are refused with 503 instead of piling up."
    )
    prefill_chunk: int = Field(
        512,
        ge=16,
        description="Prompt tokens prefilled per scheduler step, so a long prompt cannot stall running sequences.",
    )
    context_window: int | None = Field(
        None,
        description="Max prompt+completion tokens; default: the model's max_position_embeddings (capped at 8192).",
    )
    on_update: Literal["drain", "continue", "keep"] = Field(
        "drain", description="What a weight update does to generations in flight. 'drain' (default, every "
        "engine): the update waits until they finish on the old weights. 'continue' (embedded engine): it "
        "happens between two decode steps; they continue on the new weights from the tokens already sampled "
        "(their KV computed again), each token recorded with the version that sampled it "
        "(sampling.token_versions). 'keep' (vLLM with LoRA): nothing waits; they finish on the old adapter "
        "while new calls go to the new one (two versions served briefly, max_loras >= 2), and the old adapter "
        "is unloaded once its last call is done.")
    default_max_tokens: int | None = Field(
        None, ge=1, description="Completion budget when a request sets no max_tokens (clipped to the window); "
        "default: the room the window leaves, as vLLM gives it."
    )
    prefix_cache_tokens: int = Field(
        8192,
        ge=0,
        description="Tokens of finished sequences whose KV is kept to skip re-prefilling shared prefixes "
        "(multi-turn agents resend the history); 0 disables. SmolLM2-135M: ~46 KB per token.",
    )
    device: str = Field(
        "cpu",
        description="Where the embedded engine runs its model: cpu, cuda or cuda:N (auto: cuda when available, "
        "else cpu). The trainer has its own [training] device. vLLM ignores it.",
    )
    seed: int = Field(0, description="Base seed for requests that do not set their own.")
    num_threads: int | None = Field(
        None, description="torch threads for generation; default: every core this process may use."
    )
    vllm: VllmConfig = Field(
        default_factory=VllmConfig, description="vLLM settings ([engine.vllm]): launch or attach, LoRA, venv."
    )

    def embedded_device(self) -> str:
        """The torch device the embedded engine serves from (``auto`` resolved on this machine)."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def embedded_dtype(self) -> str:
        """The torch dtype name the embedded engine loads its weights in (``auto`` resolved on its device:
        bf16 on a GPU, on a CPU only where it multiplies bf16 natively)."""
        if self.dtype != "auto":
            return self.dtype
        import torch

        from harnessrl import bf16

        return "bfloat16" if bf16.native_bf16(torch.device(self.embedded_device())) else "float32"
