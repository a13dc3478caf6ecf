"""The running batch's KV cache against a plain model of it: every row's history, right-aligned and zero-padded.

Joins of shorter and longer prompts, decode steps, rows leaving in any pattern: after each, the cache's
window must read exactly as the per-row histories do, wherever its buffers happen to sit."""

from __future__ import annotations

import random

import torch

from harnessrl.engines.embedded import kvcache
from harnessrl.engines.embedded.kvcache import BatchKV

LAYERS, HEADS, DIM = 2, 3, 4


def _prefilled(length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.randn(1, HEADS, length, DIM), torch.randn(1, HEADS, length, DIM)) for _ in range(LAYERS)]


def _check(kv: BatchKV, rows: list[list[list[tuple[torch.Tensor, torch.Tensor]]]]) -> None:
    """``rows[i][layer]`` = that row's (key, value) columns, oldest first."""
    assert kv.batch == len(rows)
    if not rows:
        return
    lengths = [len(r[0]) for r in rows]
    assert kv.length == max(lengths)  # leading all-padding columns are trimmed
    for i, n in enumerate(lengths):
        assert kv.valid[i].tolist() == [False] * (kv.length - n) + [True] * n
    for layer_index, layer in enumerate(kv.cache().layers):
        assert layer.keys.shape == (len(rows), HEADS, kv.length, DIM)
        assert layer.get_seq_length() == kv.length
        for i, n in enumerate(lengths):
            want_k = torch.stack([k for k, _ in rows[i][layer_index]], dim=1)
            want_v = torch.stack([v for _, v in rows[i][layer_index]], dim=1)
            torch.testing.assert_close(layer.keys[i, :, kv.length - n :], want_k, rtol=0, atol=0)
            torch.testing.assert_close(layer.values[i, :, kv.length - n :], want_v, rtol=0, atol=0)
            # padding is read by the masked attention: it must be zeros, never stale or NaN memory
            assert not layer.keys[i, :, : kv.length - n].any() and not layer.values[i, :, : kv.length - n].any()


def _columns(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    return [[(k[0, :, t], v[0, :, t]) for t in range(k.shape[2])] for k, v in layers]


def test_joins_steps_and_leaves_read_as_the_rows_histories() -> None:
    rng = random.Random(0)
    torch.manual_seed(0)
    for trial in range(6):
        kv = BatchKV(max_rows=None if trial % 2 else 8)
        rows: list[list[list[tuple[torch.Tensor, torch.Tensor]]]] = []
        for _ in range(60):
            op = rng.random()
            if op < 0.35 or not rows:  # a newcomer, shorter or longer than the batch (past the spare columns)
                length = rng.choice([1, 3, 8, 20, 90, 150])
                copies = rng.choice([1, 1, 2])
                layers = _prefilled(length)
                kv.join(layers, copies)
                rows += [[list(c) for c in _columns(layers)] for _ in range(copies)]
            elif op < 0.8:  # a decode step writes one column for every row
                mask = kv.step_mask()
                cache = kv.cache()
                new = [(torch.randn(len(rows), HEADS, 1, DIM), torch.randn(len(rows), HEADS, 1, DIM))
                       for _ in range(LAYERS)]
                for layer, (k, v) in zip(cache.layers, new, strict=True):
                    layer.update(k, v)
                kv.after_step(mask)
                for i, row in enumerate(rows):
                    for layer_index, (k, v) in enumerate(new):
                        row[layer_index].append((k[i, :, 0], v[i, :, 0]))
            else:  # some rows finish (any subset, order kept)
                keep = sorted(rng.sample(range(len(rows)), rng.randint(0, len(rows))))
                kv.keep(keep)
                rows = [rows[i] for i in keep]
            _check(kv, rows)


def test_a_join_with_room_writes_only_the_newcomer() -> None:
    """The point of the spare rows and columns: the batch is not copied when a sequence joins or leaves."""
    kv = BatchKV(max_rows=8)
    kv.join(_prefilled(10), 1)
    buffers = [layer.kbuf for layer in kv.layers]
    kv.join(_prefilled(6), 1)  # shorter: pads on the left
    kv.join(_prefilled(10 + kvcache.SPARE_COLUMNS // 2), 2)  # longer, within the spare columns on the left
    kv.keep([0, 2, 3])
    assert all(layer.kbuf is buf for layer, buf in zip(kv.layers, buffers, strict=True))
    kv.join(_prefilled(10 + 2 * kvcache.SPARE_COLUMNS), 1)  # past them: new buffers
    assert all(layer.kbuf is not buf for layer, buf in zip(kv.layers, buffers, strict=True))
