"""How torch's CPU threads wait: asleep, not spinning, unless the user chose (set before torch loads).

libgomp (torch's OpenMP on Linux) lets a thread that waits at the end of a parallel region spin for a
while before it sleeps. The embedded engine's decode step is hundreds of small parallel regions; when
another busy process shares the cores (a second run, a test suite, the user's own work), a spinning
waiter holds a core while the thread it waits for is descheduled, and every region costs a scheduler
time slice. Measured here: 24 two-call demo attempts took 212 s beside a niced simulation and 459 s
beside one busy process, against 28-30 s with sleeping waiters; alone on an idle machine sleeping costs
about 1.2x (``benchmarks/omp_wait.py``). libgomp reads its environment once, when torch loads it, so this
runs when ``harnessrl`` is imported.
"""

from __future__ import annotations

import os
import sys

#: The user's own choice wins: either variable set means "leave OpenMP as configured".
USER_KNOBS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def sleep_while_waiting() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` for this process (and its children) when it can still take effect.

    False when the user set a wait policy or spin count, or torch is already loaded (too late: the
    policy of its thread pool is fixed).
    """
    if any(knob in os.environ for knob in USER_KNOBS) or "torch" in sys.modules:
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True
