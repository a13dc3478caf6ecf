"""The token view of a call: each prompt and completion token with its text, loss mask and logprob.

Token text comes from the run's tokenizer (``engine.model`` of the run's config, loaded offline once per
model spec); without one the view shows token IDs. A completion token is *trained* when the rollout's
samples (``build_samples``) put it under loss mask 1; prompt tokens are always context for that call.
Tokens the gateway replaced because they spelled a secret (``sampling["redacted"]``) read ``[REDACTED]``
(once per run of them) and are never trained.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Decoder = Callable[[Sequence[int]], list[str]]
REDACTED_TEXT = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class TokenCell:
    id: int
    text: str
    trained: bool
    logprob: float | None

    @property
    def lp_class(self) -> str:
        """A bucket of the sampling probability, for colouring (lp0 = unlikely ... lp4 = near certain)."""
        if self.logprob is None:
            return "lpn"
        p = math.exp(self.logprob)
        return "lp" + str(sum(p >= t for t in (0.05, 0.2, 0.5, 0.9)))


def token_cells(ids: Sequence[int], logprobs: Sequence[float] | None, trained: int,
                decode: Decoder | None, redacted: Set[int] = frozenset()) -> list[TokenCell]:
    """Cells for ``ids``; the first ``trained`` of them are under loss mask 1, except ``redacted`` ones
    (placeholders of a secret: shown as ``[REDACTED]``, never trained)."""
    texts = decode(ids) if decode is not None else [f"[{i}]" for i in ids]
    out = []
    for k, tid in enumerate(ids):
        lp = float(logprobs[k]) if logprobs is not None and k < len(logprobs) else None
        if k in redacted:
            text = "" if k - 1 in redacted else REDACTED_TEXT
            out.append(TokenCell(int(tid), text, False, lp))
            continue
        out.append(TokenCell(int(tid), texts[k], k < trained, lp))
    return out


class Tokenizers:
    """Per-token decoders by model spec, loaded lazily and cached (a failed load is remembered too)."""

    def __init__(self, override: str | None = None) -> None:
        self.override = override
        self._lock = threading.Lock()
        self._decoders: dict[str, Decoder | None] = {}

    def spec_for(self, run_config: dict[str, Any] | None) -> str | None:
        if self.override:
            return None if self.override.lower() == "none" else self.override
        engine = (run_config or {}).get("engine") if isinstance(run_config, dict) else None
        spec = engine.get("model") if isinstance(engine, dict) else None
        return spec if isinstance(spec, str) and spec else None

    def decoder(self, run_config: dict[str, Any] | None) -> Decoder | None:
        spec = self.spec_for(run_config)
        if spec is None:
            return None
        with self._lock:
            if spec not in self._decoders:
                self._decoders[spec] = _load(spec)
            return self._decoders[spec]


def _load(spec: str) -> Decoder | None:
    try:
        from harnessrl.models import load_tokenizer

        tok = load_tokenizer(spec)
    except Exception as exc:  # no model files here: fall back to token ids
        log.warning("dashboard: no tokenizer for model %r (%s); showing token ids", spec, exc)
        return None
    cache: dict[int, str] = {}

    def decode(ids: Sequence[int]) -> list[str]:
        missing = sorted({int(i) for i in ids if int(i) not in cache})
        if missing:
            texts = tok.batch_decode([[i] for i in missing], skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)
            cache.update(zip(missing, texts, strict=True))
        return [cache[int(i)] for i in ids]

    return decode
