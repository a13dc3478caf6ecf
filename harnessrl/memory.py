"""Resident memory of one process (engine, gateway, trainer): glibc's allocator settings, trimming, the peak.

A training step allocates and frees a few GB of activations. With glibc's default *dynamic* mmap threshold,
the first large free raises the threshold to that size, after which activation-sized blocks come from the
heap arenas, where a freed block can be reused but is rarely returned; one arena per thread (the engine,
the gateway, ``asyncio.to_thread`` workers) multiplies that. Measured on SmolLM2-135M with LoRA, three
identical 1000-token micro-batches: resident memory ratcheted 3.5 -> 4.8 GB (peak 4.95 GB) by default,
versus a flat 2.55 GB peak falling back to 1.08 GB with a fixed 256 KB threshold and two arenas.

A low threshold costs page faults: every mmap'd block is zero-filled by the kernel when touched and
unmapped when freed. Training used 256 KB until measured: the demo's training step took 33.2 s at 256 KB
(sys time 48 s of 112 CPU-s) against 22.7 s at 4 MB, peak 1.26 against 1.83 GiB
(``MALLOC_MMAP_THRESHOLD_=<bytes> benchmarks/demo_train_step.py <store> --variants float32:1``; 1 and 2 MB
were as slow as 256 KB: a 1000-token micro-batch's hidden states are 2.4 MB each). So the trainer and the
engine share one threshold, 4 MB, and the trainer trims what the rollouts freed before it starts and what it
freed after it ends (``trainer_allocations``). Serving at 4 MB: the running batch's KV buffers (several MB per
layer for 24 sequences) and the logits are mmap'd and leave the process when freed, while the many small
per-request tensors stay on the heap. Measured with ``benchmarks/serve_memory.py --thresholds 32 4 1 --rounds 2``
(24 two-call demo attempts, two waves, one process per setting, alternated): median peak 1.81 GiB at 32 MB
(1.66 and 1.95: it depends on where freed blocks land), 1.68 at 4 MB, 1.47 at 1 MB; median time 1.00x,
1.18x and 1.35x (an earlier pair of rounds gave 4 MB 33-36 s against 34 s: the cost at 4 MB is within this
machine's noise, at 1 MB it is not).

Between steps, serving frees heap blocks continually (the prefix cache's KV, per-request tensors under the
threshold); glibc keeps those pages resident until a trim, so a run's resident memory drifted up toward the
heap's high-water mark, step after step (the demo's floor rose about 40 MB a step and its final evaluation
peaked at 2.20-2.51 GiB). ``trim_on_growth`` trims whenever resident memory has grown 128 MB since the last
trim, outside training steps (the floor of an 8-step demo run still rises about 30 MB a step with it,
cause not found: docs/training-log.md). glibc's own counters on a 5-step demo run without it
(``mallinfo2``): heap in use 0.6-0.9 GB, freed but kept by the allocator up to 0.9 GB (resident where it
was touched).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator

logger = logging.getLogger(__name__)

# glibc mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

#: Blocks at least this large are mmap'd, and unmapped as soon as they are freed: KV buffers, logits, the
#: largest activations; small per-request tensors and 2.4 MB hidden states stay on the heap (see above).
MMAP_THRESHOLD = 4 * 1024 * 1024
ARENA_MAX = 2
#: Between training steps, freed heap pages go back to the kernel whenever resident memory has grown this
#: much since the last trim (checked every ``TRIM_CHECK_S``; ``trim_on_growth``).
TRIM_GROWTH_BYTES = 128 * 1024 * 1024
TRIM_CHECK_S = 0.5


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it; musl and macOS keep their own allocators)
        return libc
    except (OSError, AttributeError):
        return None


def tune_allocator() -> bool:
    """Cap glibc's arenas, fix the mmap threshold and start trimming on growth (call early, before the
    threads start); False where the allocator is not glibc.

    A ``MALLOC_ARENA_MAX`` or ``MALLOC_MMAP_THRESHOLD_`` the user set wins.
    """
    libc = _glibc()
    if libc is None:
        return False
    if "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(_M_ARENA_MAX, ARENA_MAX)
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    trim_on_growth()
    return True


class _Trimmer:
    """A daemon thread that calls ``malloc_trim`` when resident memory has grown by ``growth`` bytes since the
    last trim, unless a training step is running.

    Serving frees heap blocks all the time (the prefix cache's KV, per-request tensors under the mmap
    threshold) and glibc keeps freed pages resident until something trims them, so over a run resident
    memory drifts up to the heap's high-water mark, hundreds of MB above what is in use. A trim hands them
    back in a few ms. Triggering on growth rather than on a clock trims only while memory is climbing: a
    steady phase costs one ``/proc/self/statm`` read per check. Training steps are skipped: their
    activations are freed and reused within the step, and a page handed back would be zero-filled again
    when touched (see above; ``trainer_allocations`` trims before and after the step instead).
    """

    def __init__(self, growth: int, check_s: float = TRIM_CHECK_S) -> None:
        self.growth = growth
        self.check_s = check_s
        self._paused = 0
        self._lock = threading.Lock()
        self.trims = 0
        threading.Thread(target=self._run, name="harnessrl-malloc-trim", daemon=True).start()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1

    def _run(self) -> None:
        floor = resident_bytes() or 0
        while True:
            time.sleep(self.check_s)
            rss = resident_bytes()
            if rss is None:
                return
            if rss - floor < self.growth:
                floor = min(floor, rss)
                continue
            with self._lock:  # held while trimming, so a step that starts waits for the trim to end
                if self._paused:
                    continue
                release_free_memory()
                self.trims += 1
            floor = resident_bytes() or 0


@functools.cache
def trim_on_growth(growth: int = TRIM_GROWTH_BYTES) -> _Trimmer | None:
    """Start the process's trimming thread (once); None without glibc or with ``HARNESSRL_TRIM_GROWTH_MB=0``,
    which also overrides the growth (``benchmarks/serve_memory.py`` compares settings)."""
    if "HARNESSRL_TRIM_GROWTH_MB" in os.environ:
        growth = int(float(os.environ["HARNESSRL_TRIM_GROWTH_MB"]) * 1024 * 1024)
    if _glibc() is None or growth <= 0 or resident_bytes() is None:
        return None
    return _Trimmer(growth)


def resident_bytes() -> int | None:
    """This process's resident set now (``/proc/self/statm``); None where /proc is not available."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def trainer_allocations() -> Iterator[None]:
    """Around a training step: the fixed threshold and arena cap (a ``Trainer`` used without ``harnessrl
    train`` gets them too), what the rollouts freed trimmed before activations stack on top of it, and what
    the step freed trimmed after it."""
    tune_allocator()
    trimmer = trim_on_growth()
    with trimmer.paused() if trimmer is not None else contextlib.nullcontext():
        release_free_memory()
        try:
            yield
        finally:
            release_free_memory()


def release_free_memory() -> None:
    """Hand freed heap pages back to the kernel (``malloc_trim``); a no-op without glibc."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """The process's peak resident set (``VmHWM``) in bytes; None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
