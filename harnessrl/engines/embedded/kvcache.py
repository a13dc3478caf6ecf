"""The running batch's KV cache: right-aligned rows that sequences join and leave between steps.

Every row ends at the same column, so one decode step writes every sequence's new key/value at the same
place; shorter histories are left-padded and masked. A new sequence (prefilled alone, so no padded query rows
ever exist) is copied in on join; finished rows are dropped and fully padded leading columns trimmed.

The buffers keep spare rows and spare columns on both sides, and the used part is a window
``[:batch, :, lo:hi]`` of them. Joining, leaving and trimming move that window and write only the rows
that change: when 24 attempts join one at a time (each harness sends its call when it is ready), copying
the whole batch on every join costs O(batch^2) copies a wave, a fifth of the engine's time in the
demo's rollouts (py-spy), and a fresh multi-MB buffer each time, whose pages the kernel must fault in.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

#: Spare columns kept left of the window (a newcomer longer than the batch extends it there, no copy) and
#: right of it (decode steps write there); a buffer that runs out is reallocated with this much again.
SPARE_COLUMNS = 64



def cache_rows(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A prefilled ``DynamicCache``'s (keys, values) per layer, the rows ``BatchKV.join`` and the prefix cache
    take (every layer of a decoder-only model is a full-attention layer with both set)."""
    rows = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        assert isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor), "unfilled cache layer"
        rows.append((keys, values))
    return rows

class _GrowLayer(DynamicLayer):
    """A DynamicLayer over preallocated buffers; ``keys``/``values`` are views of the used window."""

    def __init__(self, kbuf: torch.Tensor, vbuf: torch.Tensor) -> None:
        super().__init__()
        self.kbuf, self.vbuf = kbuf, vbuf
        self.batch = self.lo = self.hi = 0
        self.is_initialized = True
        self.device = kbuf.device
        self._views()

    @property
    def length(self) -> int:
        return self.hi - self.lo

    def _views(self) -> None:
        self.keys = self.kbuf[: self.batch, :, self.lo : self.hi]
        self.values = self.vbuf[: self.batch, :, self.lo : self.hi]

    def reshape(self, rows: int, hi: int, cap: int) -> None:
        """Move the used window to end at column ``hi`` of new ``[rows, H, cap, D]`` buffers (right-aligned:
        the window's last column lands on ``hi``). Spare parts are left unwritten (``new_empty``): they are never
        read before a join or a decode step writes them, and pages never written are not resident."""
        n = self.length
        for name in ("kbuf", "vbuf"):
            old = getattr(self, name)
            buf = old.new_empty(rows, old.shape[1], cap, old.shape[3])
            if n:
                buf[: self.batch, :, hi - n : hi] = old[: self.batch, :, self.lo : self.hi]
            setattr(self, name, buf)
        self.lo, self.hi = hi - n, hi
        self._views()

    def update(self, key_states, value_states, *args, **kwargs):  # type: ignore[override,unused-ignore]
        need = self.hi + key_states.shape[-2]
        if need > self.kbuf.shape[2]:
            self.reshape(self.kbuf.shape[0], self.hi, need + max(SPARE_COLUMNS, self.length // 2))
        self.kbuf[: self.batch, :, self.hi : need] = key_states
        self.vbuf[: self.batch, :, self.hi : need] = value_states
        self.hi = need
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


class BatchKV:
    """KV cache + validity mask of the running batch (row i = i-th running sequence)."""

    def __init__(self, max_rows: int | None = None, device: torch.device | str = "cpu") -> None:
        #: Rows a buffer is sized for at most (the engine's ``max_batch``); None: grow as needed.
        self.max_rows = max_rows
        self.device = torch.device(device)  # the model's: masks and row indices must be where the KV is
        self.layers: list[_GrowLayer] = []
        self.valid = torch.zeros(0, 0, dtype=torch.bool, device=self.device)  # [B, L]: False = left padding

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
        return torch.cat([self.valid, torch.ones(self.batch, 1, dtype=torch.bool, device=self.device)], dim=1)

    def after_step(self, mask: torch.Tensor) -> None:
        self.valid = mask

    def _row_capacity(self, need: int) -> int:
        grown = max(need, 2 * self.batch, 4)
        return max(need, min(grown, self.max_rows)) if self.max_rows else grown

    def join(self, row_layers: list[tuple[torch.Tensor, torch.Tensor]], copies: int) -> None:
        """Append ``copies`` rows holding a prefilled sequence (per-layer ``[1, H, P, D]`` keys/values)."""
        plen = row_layers[0][0].shape[2]
        old_b, old_len = self.batch, self.length
        new_b, new_len = old_b + copies, max(old_len, plen)
        if not self.layers:
            self.layers = [
                _GrowLayer(torch.empty(0, k.shape[1], 0, k.shape[3], dtype=k.dtype, device=k.device),
                           torch.empty(0, v.shape[1], 0, v.shape[3], dtype=v.dtype, device=v.device))
                for k, v in row_layers
            ]
        first = self.layers[0]
        if new_b > first.kbuf.shape[0] or first.hi - new_len < 0:  # no room: new buffers, spare on both sides
            hi = new_len + SPARE_COLUMNS
            for layer in self.layers:
                layer.reshape(self._row_capacity(new_b), hi, hi + SPARE_COLUMNS)
        hi = first.hi
        lo = hi - new_len
        for layer, (k, v) in zip(self.layers, row_layers, strict=True):
            for buf, src in ((layer.kbuf, k), (layer.vbuf, v)):
                # left padding is read (masked; 0 x NaN would still be NaN), so it must hold zeros
                buf[:old_b, :, lo : layer.lo] = 0  # the window grows left when the newcomer is longer
                buf[old_b:new_b, :, lo : hi - plen] = 0
                buf[old_b:new_b, :, hi - plen : hi] = src[0]
            layer.batch, layer.lo = new_b, lo
            layer._views()
        valid = torch.zeros(new_b, new_len, dtype=torch.bool, device=self.device)
        valid[:old_b, new_len - old_len :] = self.valid
        valid[old_b:, new_len - plen :] = True
        self.valid = valid

    def row(self, i: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A copy of row ``i``'s valid columns, per layer ``[1, H, T, D]`` (for the prefix cache)."""
        n = int(self.valid[i].sum())
        return [(layer.kbuf[i : i + 1, :, layer.hi - n : layer.hi].clone(),
                 layer.vbuf[i : i + 1, :, layer.hi - n : layer.hi].clone()) for layer in self.layers]

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (in this order) and drop leading columns that are padding in every row."""
        if not rows:
            self.layers, self.valid = [], torch.zeros(0, 0, dtype=torch.bool, device=self.device)
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        valid = self.valid.index_select(0, index)
        any_valid = valid.any(dim=0)
        start = int(torch.argmax(any_valid.to(torch.int8))) if bool(any_valid.any()) else valid.shape[1]
        if start == 0 and rows == list(range(self.batch)):
            return
        moved = next((j for j, i in enumerate(rows) if i != j), len(rows))  # rows before it stay in place
        source = index[moved:]
        for layer in self.layers:
            lo = layer.lo + start
            if moved < len(rows):
                for buf in (layer.kbuf, layer.vbuf):
                    buf[moved : len(rows), :, lo : layer.hi] = buf[:, :, lo : layer.hi].index_select(0, source)
            layer.batch, layer.lo = len(rows), lo
            layer._views()
        self.valid = valid[:, start:]
