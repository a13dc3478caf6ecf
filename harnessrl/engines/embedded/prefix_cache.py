"""Reuse of KV for shared prompt prefixes (agent turns resend the whole conversation every call).

After a sequence finishes, its KV (prompt + completion) is kept here, up to a token budget, least recently
used first out. A new prompt that starts with a kept sequence's tokens prefills only the rest. On two cores
this turns a multi-turn agent's per-call prefill from the whole history into the new turn only. Entries that
are a prefix of a newer entry are dropped, so one conversation occupies one entry.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from transformers import DynamicCache

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, H, T, D]


class PrefixCache:
    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[int, tuple[torch.Tensor, Layers]] = OrderedDict()
        self._next = 0
        self.tokens = 0

    def insert(self, token_ids: list[int], layers: Layers) -> None:
        n = len(token_ids)
        if self.max_tokens <= 0 or n < 2 or n > self.max_tokens:
            return
        ids = torch.tensor(token_ids, dtype=torch.long)
        for key, (other, _) in list(self._entries.items()):
            if len(other) <= n and torch.equal(other, ids[: len(other)]):
                self._remove(key)  # the new entry covers it
            elif len(other) >= n and torch.equal(other[:n], ids):
                self._entries.move_to_end(key)
                return  # already covered by a longer entry
        self._entries[self._next] = (ids, layers)
        self._next += 1
        self.tokens += n
        while self.tokens > self.max_tokens:
            self._remove(next(iter(self._entries)))

    def lookup(self, prompt_ids: list[int]) -> tuple[int, DynamicCache | None]:
        """Longest reusable prefix of ``prompt_ids`` (always leaving one token to prefill) and its cache."""
        if not self._entries or len(prompt_ids) < 2:
            return 0, None
        prompt = torch.tensor(prompt_ids, dtype=torch.long)
        best, best_key = 0, None
        for key, (ids, _) in self._entries.items():
            m = min(len(ids), len(prompt) - 1)
            diff = (ids[:m] != prompt[:m]).nonzero()
            match = int(diff[0]) if len(diff) else m
            if match > best:
                best, best_key = match, key
        if (
            best_key is None or best < 16
        ):  # tiny matches (a system prompt's first tokens) are not worth a copy
            return 0, None
        self._entries.move_to_end(best_key)
        cache = DynamicCache()
        for i, (k, v) in enumerate(self._entries[best_key][1]):
            cache.update(k[:, :, :best], v[:, :, :best], i)
        return best, cache

    def clear(self) -> None:
        self._entries.clear()
        self.tokens = 0

    def _remove(self, key: int) -> None:
        ids, _ = self._entries.pop(key)
        self.tokens -= len(ids)
