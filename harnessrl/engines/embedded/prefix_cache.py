"""Reuse of KV for shared prompt prefixes (agent turns resend the whole conversation every call).

After a sequence is prefilled and again after it finishes, its KV (prompt, then prompt + completion) is kept
here, up to a token budget, least recently used first out. A new prompt that starts with kept tokens
prefills only the rest. On two cores this turns a multi-turn agent's per-call prefill from the whole
history into the new turn only.

The kept sequences form a radix tree: a prefix that several sequences share (the system prompt and tool
list every attempt of a run sends, a task's question its attempts repeat) is stored once. With 24
attempts of the CPU demo in flight that is what the budget is spent on: each attempt's own tokens, not 24
copies of the same system prompt (about 46 KB of KV per token for SmolLM2-135M).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, H, T, D]

#: A shorter match (a system prompt's first tokens) is not worth the copy.
MIN_REUSE = 16


@dataclass(eq=False)
class _Node:
    """An edge of the tree: its tokens and their KV (own storage, so dropping a node frees it)."""

    ids: tuple[int, ...]
    layers: Layers
    parent: _Node | None
    children: dict[int, _Node] = field(default_factory=dict)  # first token -> child
    used: int = 0  # clock of the last insert or lookup through it


def _common(ids: tuple[int, ...], seq: list[int], start: int, end: int) -> int:
    """How many of ``ids`` equal ``seq[start:end]`` from the first token on."""
    n = min(len(ids), end - start)
    i = 0
    while i < n and ids[i] == seq[start + i]:
        i += 1
    return i


def _slice(layers: Layers, start: int, end: int) -> Layers:
    return [(k[:, :, start:end].clone(), v[:, :, start:end].clone()) for k, v in layers]


class PrefixCache:
    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._root = _Node((), [], None)
        self._nodes: set[_Node] = set()
        self._clock = 0
        self.tokens = 0  # tokens held, each shared prefix counted once

    def insert(self, token_ids: list[int], layers: Layers) -> None:
        """Keep the KV of ``token_ids`` (per layer ``[1, H, len(token_ids), D]``); only the tokens the tree
        does not hold yet are copied."""
        n = len(token_ids)
        if self.max_tokens <= 0 or n < 2 or n > self.max_tokens:
            return
        self._clock += 1
        node, pos = self._root, 0
        while pos < n:
            child = node.children.get(token_ids[pos])
            if child is None:
                break
            m = _common(child.ids, token_ids, pos, n)
            if m < len(child.ids):
                child = self._split(child, m)
            child.used = self._clock
            node, pos = child, pos + m
        if pos < n:
            leaf = _Node(tuple(token_ids[pos:]), _slice(layers, pos, n), node, used=self._clock)
            node.children[token_ids[pos]] = leaf
            self._nodes.add(leaf)
            self.tokens += n - pos
            node = leaf
        self._evict(keep=node)

    def lookup(self, prompt_ids: list[int]) -> tuple[int, DynamicCache | None]:
        """Longest reusable prefix of ``prompt_ids`` (always leaving one token to prefill) and its cache."""
        limit = len(prompt_ids) - 1
        if not self._root.children or limit < 1:
            return 0, None
        path: list[tuple[_Node, int]] = []
        node, pos = self._root, 0
        while pos < limit:
            child = node.children.get(prompt_ids[pos])
            if child is None:
                break
            m = _common(child.ids, prompt_ids, pos, limit)
            path.append((child, m))
            pos += m
            if m < len(child.ids):
                break
            node = child
        if pos < MIN_REUSE:
            return 0, None
        self._clock += 1
        for n, _ in path:
            n.used = self._clock
        cache = DynamicCache()
        for i in range(len(path[0][0].layers)):
            keys = torch.cat([n.layers[i][0][:, :, :m] for n, m in path], dim=2)
            values = torch.cat([n.layers[i][1][:, :, :m] for n, m in path], dim=2)
            cache.update(keys, values, i)
        return pos, cache

    def clear(self) -> None:
        """Drop every kept sequence, freeing its KV now.

        A node and its children point at each other, so emptying the root alone left every subtree a
        reference cycle for Python's cycle collector, and the engine's ``malloc_trim`` right after a clear
        could not hand back its KV (up to ``max_tokens`` x 46 KB for SmolLM2). Cutting each node's parent
        link leaves the tree without cycles (eviction only ever drops leaves, which close none).
        """
        for node in self._nodes:
            node.parent = None
        self._root.children.clear()
        self._nodes.clear()
        self.tokens = 0

    def _split(self, node: _Node, m: int) -> _Node:
        """Cut ``node`` after its first ``m`` tokens; returns the new upper part (its parent's child now)."""
        assert node.parent is not None
        head = _Node(node.ids[:m], _slice(node.layers, 0, m), node.parent, used=node.used)
        node.parent.children[node.ids[0]] = head
        node.ids, node.layers, node.parent = node.ids[m:], _slice(node.layers, m, len(node.ids)), head
        head.children[node.ids[0]] = node
        self._nodes.add(head)
        return head

    def _evict(self, keep: _Node) -> None:
        """Drop least recently used leaves until within budget (never ``keep``, the newest path's end)."""
        while self.tokens > self.max_tokens:
            leaves = [n for n in self._nodes if not n.children and n is not keep]
            if not leaves:
                return
            victim = min(leaves, key=lambda n: n.used)
            assert victim.parent is not None
            del victim.parent.children[victim.ids[0]]
            self._nodes.discard(victim)
            self.tokens -= len(victim.ids)
