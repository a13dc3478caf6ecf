"""The prefix cache's radix tree: shared prefixes stored once, lookups return exactly the inserted KV."""

from __future__ import annotations

import gc
import random
import weakref

import torch

from harnessrl.engines.embedded.prefix_cache import MIN_REUSE, PrefixCache

LAYERS, HEADS, DIM = 2, 2, 3


def kv(ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """KV as a causal model makes it: position t depends on the tokens up to t (here: a hash of them)."""
    vals = torch.tensor([float(hash(tuple(ids[: t + 1])) % 100_003) for t in range(len(ids))])
    out = []
    for layer in range(LAYERS):
        k = (vals + layer)[None, None, :, None].expand(1, HEADS, len(ids), DIM).clone()
        out.append((k, -k))
    return out


def test_a_shared_prefix_is_stored_once_and_every_sequence_reads_back_exactly():
    cache = PrefixCache(max_tokens=10_000)
    system = list(range(1000, 1250))  # the system prompt and tools every attempt sends
    seqs = [system + [7, i, 8, 9] + [random.Random(i).randrange(50) for _ in range(30)] for i in range(24)]
    for s in seqs:
        cache.insert(s, kv(s))
    assert cache.tokens == 250 + 1 + 24 * 33  # the system prompt once, "7" once, then each attempt's own tokens
    for s in seqs:
        prompt = s + [5, 5, 5]
        n, got = cache.lookup(prompt)
        assert n == len(s)
        want = kv(prompt)
        for layer in range(LAYERS):
            assert torch.equal(got.layers[layer].keys, want[layer][0][:, :, :n])
            assert torch.equal(got.layers[layer].values, want[layer][1][:, :, :n])


def test_a_prompt_that_leaves_a_stored_sequence_midway_reuses_up_to_the_divergence():
    cache = PrefixCache(max_tokens=10_000)
    a = list(range(100))
    cache.insert(a, kv(a))
    b = a[:40] + [999] * 20
    n, got = cache.lookup(b)
    assert n == 40 and torch.equal(got.layers[0].keys, kv(b)[0][0][:, :, :40])
    cache.insert(b, kv(b))  # splits the stored edge at 40
    assert cache.tokens == 100 + 20
    assert cache.lookup(a + [1])[0] == 100 and cache.lookup(b + [1])[0] == 60
    assert cache.lookup(a)[0] == 99  # one token is always left to prefill


def test_short_matches_are_not_reused_and_the_budget_evicts_least_recently_used():
    cache = PrefixCache(max_tokens=100)
    short = list(range(MIN_REUSE - 1))
    cache.insert(short + [1, 2], kv(short + [1, 2]))
    assert cache.lookup(short + [3, 4]) == (0, None)
    cache.clear()
    old, new = [1] * 60, [2] * 60
    cache.insert(old, kv(old))
    cache.insert(new, kv(new))  # 120 tokens > 100: the older leaf goes
    assert cache.tokens == 60
    assert cache.lookup(old + [0])[0] == 0 and cache.lookup(new + [0])[0] == 60
    cache.insert(list(range(500)), kv(list(range(500))))  # larger than the whole budget: not kept
    assert cache.tokens == 60


def test_clear_frees_the_kept_kv_without_waiting_for_the_garbage_collector():
    """Nodes and their children point at each other: clear() must break that, or a step's whole tree stays
    resident until Python's rare full collection (the engine trims right after clearing)."""
    cache = PrefixCache(max_tokens=10_000)
    system = list(range(1000, 1100))
    for i in range(3):  # a shared node with three children, the deepest with KV of its own
        s = system + [i] * 20
        cache.insert(s, kv(s))
    tensors = [weakref.ref(k) for node in cache._nodes for k, _ in node.layers]
    assert len(tensors) == 4 * LAYERS and all(t() is not None for t in tensors)
    gc.disable()
    try:
        cache.clear()
        assert [t() for t in tensors if t() is not None] == []
    finally:
        gc.enable()
    assert cache.lookup(system + [0] * 20) == (0, None)
