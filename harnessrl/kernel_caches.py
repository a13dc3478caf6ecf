"""Bounded oneDNN kernel caches (set before torch loads): bf16 on a CPU compiles a matmul per shape.

On CPUs that multiply bf16 natively, torch runs bf16 matmuls through oneDNN, which JIT-compiles a primitive
for every new (M, K, N) and keeps it in two caches, oneDNN's own and ideep's LRU, of 1,024 entries each by
default. The demo's shapes keep changing (every packed micro-batch has its own token count, every prefill
its own length), so those caches only grow: 200 distinct shapes of one linear layer, forward and backward,
kept 255 MB resident after ``malloc_trim`` (fp32: 23 MB), about 0.4 MB an entry. That was the demo's
resident floor rising 30-80 MB a step. At 64 entries each the same loop kept 54 MB, and what is hot stays:
a decode step's 24-row matmul took 145 us with them against 2 ms re-created every call (no cache), and
large matmuls do not notice a miss. A capacity the user set wins.
"""

from __future__ import annotations

import os
import sys

#: Entries per cache: a decode step (5 shapes), a prefill (5) and a micro-batch's forward and backward
#: (about 25, LoRA's small matmuls included) all fit.
CAPACITY = 64
KNOBS = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_kernel_caches(capacity: int = CAPACITY) -> bool:
    """Cap oneDNN's primitive cache and ideep's LRU at ``capacity`` entries, each unless the user set it.

    False when torch is already loaded (its caches may have read their capacity already)."""
    if "torch" in sys.modules:
        return False
    for knob in KNOBS:
        os.environ.setdefault(knob, str(capacity))
    return True
