"""The running batch's KV cache: right-aligned rows that sequences join and leave between steps.

Every row ends at the same column, so one decode step writes every sequence's new key/value at the same
place; shorter histories are left-padded and masked. A new sequence (prefilled alone, so no padded query rows
ever exist) is copied in on join; finished rows are dropped and fully padded leading columns trimmed. The
buffers keep spare capacity so a decode step writes in place instead of re-concatenating the whole cache.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class _GrowLayer(DynamicLayer):
    """A DynamicLayer that writes into a preallocated buffer; ``keys``/``values`` are views of the used part."""

    def __init__(self, kbuf: torch.Tensor, vbuf: torch.Tensor, length: int) -> None:
        super().__init__()
        self.kbuf, self.vbuf, self.length = kbuf, vbuf, length
        self.is_initialized = True
        self.device = kbuf.device
        self._views()

    def _views(self) -> None:
        self.keys = self.kbuf[:, :, : self.length]
        self.values = self.vbuf[:, :, : self.length]

    def update(self, key_states, value_states, *args, **kwargs):  # type: ignore[override]
        need = self.length + key_states.shape[-2]
        if need > self.kbuf.shape[2]:
            self.kbuf = _grow(self.kbuf, need)
            self.vbuf = _grow(self.vbuf, need)
        self.kbuf[:, :, self.length : need] = key_states
        self.vbuf[:, :, self.length : need] = value_states
        self.length = need
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


def _grow(buf: torch.Tensor, need: int) -> torch.Tensor:
    """A larger buffer holding ``buf``. The spare columns are left unwritten (``new_empty``): they are never
    read before a decode step writes them, and pages never written are not resident, so spare capacity
    costs address space, not memory."""
    bigger = buf.new_empty(buf.shape[0], buf.shape[1], max(need, int(buf.shape[2] * 1.5) + 16), buf.shape[3])
    bigger[:, :, : buf.shape[2]] = buf
    return bigger


class BatchKV:
    """KV cache + validity mask of the running batch (row i = i-th running sequence)."""

    def __init__(self) -> None:
        self.layers: list[_GrowLayer] = []
        self.valid = torch.zeros(0, 0, dtype=torch.bool)  # [B, L]: False = left padding

    @property
    def batch(self) -> int:
        return self.valid.shape[0]

    @property
    def length(self) -> int:
        return self.valid.shape[1]

    def cache(self) -> DynamicCache:
        cache = DynamicCache()
        cache.layers = list(self.layers)
        return cache

    def step_mask(self) -> torch.Tensor:
        """Attention mask for one decode step (existing columns + the new token)."""
        return torch.cat([self.valid, torch.ones(self.batch, 1, dtype=torch.bool)], dim=1)

    def after_step(self, mask: torch.Tensor) -> None:
        self.valid = mask

    def join(self, row_layers: list[tuple[torch.Tensor, torch.Tensor]], copies: int) -> None:
        """Append ``copies`` rows holding a prefilled sequence (per-layer ``[1, H, P, D]`` keys/values)."""
        plen = row_layers[0][0].shape[2]
        old_b, old_len = self.batch, self.length
        new_len = max(old_len, plen)
        shift = new_len - old_len  # existing rows move right when the newcomer is longer
        if not self.layers:
            self.layers = [
                _GrowLayer(
                    torch.zeros(0, k.shape[1], 0, k.shape[3], dtype=k.dtype),
                    torch.zeros(0, v.shape[1], 0, v.shape[3], dtype=v.dtype),
                    0,
                )
                for k, v in row_layers
            ]
        cap = new_len + 64
        for layer, (k, v) in zip(self.layers, row_layers, strict=True):
            for name, src in (("kbuf", k), ("vbuf", v)):
                old = getattr(layer, name)
                buf = old.new_empty(old_b + copies, old.shape[1], cap, old.shape[3])
                buf[:, :, :new_len] = 0  # left padding is read (masked; 0 x NaN would still be NaN); spare is not
                buf[:old_b, :, shift:new_len] = old[:, :, :old_len]
                buf[old_b:, :, new_len - plen : new_len] = src[0]
                setattr(layer, name, buf)
            layer.length = new_len
            layer._views()
        valid = torch.zeros(old_b + copies, new_len, dtype=torch.bool)
        valid[:old_b, shift:] = self.valid
        valid[old_b:, new_len - plen :] = True
        self.valid = valid

    def row(self, i: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A copy of row ``i``'s valid columns, per layer ``[1, H, T, D]`` (for the prefix cache)."""
        n = int(self.valid[i].sum())
        return [
            (
                layer.kbuf[i : i + 1, :, layer.length - n : layer.length].clone(),
                layer.vbuf[i : i + 1, :, layer.length - n : layer.length].clone(),
            )
            for layer in self.layers
        ]

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (in this order) and drop leading columns that are padding in every row."""
        if not rows:
            self.layers, self.valid = [], torch.zeros(0, 0, dtype=torch.bool)
            return
        index = torch.tensor(rows, dtype=torch.long)
        valid = self.valid.index_select(0, index)
        any_valid = valid.any(dim=0)
        start = int(torch.argmax(any_valid.to(torch.int8))) if bool(any_valid.any()) else valid.shape[1]
        if start == 0 and rows == list(range(self.batch)):
            return
        length = self.length
        for layer in self.layers:
            layer.kbuf = layer.kbuf.index_select(0, index)[:, :, start:].contiguous()
            layer.vbuf = layer.vbuf.index_select(0, index)[:, :, start:].contiguous()
            layer.length = length - start
            layer._views()
        self.valid = valid[:, start:]
