"""Inference engines behind the gateway: ``embedded`` (in-process PyTorch), ``vllm`` and plain OpenAI-compatible
servers. Every engine speaks the same HTTP dialect (vLLM's OpenAI server with ``return_token_ids``)."""

from harnessrl.engines.config import EngineConfig

__all__ = ["EngineConfig"]
