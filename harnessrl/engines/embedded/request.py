"""A request as the embedded engine's scheduler holds it (below ``sequence.py``, whose choices point back to
their request, and ``engine.py``, which schedules them)."""

from __future__ import annotations

from transformers import DynamicCache

from harnessrl.engines.embedded.outputs import RequestHandle
from harnessrl.engines.embedded.sampling import SamplingParams


class Request:
    """One request in the engine: its prompt, sampling, budget and handle, its KV cache, its choices alive."""

    def __init__(
        self,
        rid: str,
        prompt_ids: list[int],
        params: SamplingParams,
        max_tokens: int,
        window: int,
        handle: RequestHandle,
    ) -> None:
        self.id, self.prompt_ids, self.params = rid, prompt_ids, params
        self.max_tokens, self.window, self.handle = max_tokens, window, handle
        self.cancelled = False
        self.adapter: str | None = None  # named LoRA adapter (several policies); None: the model as it is
        self.cache: DynamicCache | None = None
        self.prefilled = 0
        self.alive = 0  # choices still generating
