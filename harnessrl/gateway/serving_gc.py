"""The cyclic garbage collector's settings for a process that serves the gateway and nothing else.

A call allocates a few thousand container objects (the parsed request and the engine's answer: a dict and a
list per logprob) that reference counting frees as soon as the call is answered. With CPython's default
gen-0 threshold (700) a young collection ran every call or two, and each older collection walked the
startup's modules, classes and functions again: at concurrency 32 the collector was ~11% of the gateway's
CPU per call (``perf``: ``gc_collect_main``, ``visit_reachable``, ``visit_decref``). ``gc.freeze()`` once
started moves what startup built to a permanent generation that no collection walks, and a gen-0 threshold
of 5,000 collects about seven times less often. Measured with ``benchmarks/gateway_overhead.py``'s load,
4 rounds alternating (docs/measurements.md, 2026-12-06): CPU per call at concurrency 32 0.384 -> 0.340 ms;
2,000 and 10,000 did no better. Cycles are still collected, a few thousand allocations later.

Only ``harnessrl gateway`` applies it: in a process that also trains (``harnessrl train``) the gateway is a
small part of the work, and freezing objects there would keep any cycle among them for good.
"""

from __future__ import annotations

import gc

#: Allocations (net of frees) of container objects between two young collections (CPython's default: 700).
GEN0_THRESHOLD = 5000


def tune_for_serving() -> None:
    """Freeze what exists now (call once startup is done) and collect young objects less often."""
    gc.collect()  # what startup left as garbage is freed, not frozen
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def gc_status() -> dict[str, object]:
    """What the admin status shows: the thresholds, the frozen objects, the collections so far."""
    return {"threshold": list(gc.get_threshold()), "frozen": gc.get_freeze_count(),
            "collections": [s["collections"] for s in gc.get_stats()]}
