"""The allocator settings around a training step, trimming on growth between steps: harmless where glibc is
absent, and real readings of resident memory."""

from __future__ import annotations

import subprocess
import sys
import time

import torch

from harnessrl.memory import (
    TRIM_CHECK_S,
    peak_rss_bytes,
    release_free_memory,
    resident_bytes,
    trainer_allocations,
    trim_on_growth,
    tune_allocator,
)


def test_allocations_inside_a_step_are_returned_and_the_peak_is_read() -> None:
    tune_allocator()
    before = peak_rss_bytes()
    with trainer_allocations():
        big = torch.ones(64, 2**20)  # 256 MB, freed inside
        assert float(big[-1, -1]) == 1.0
        del big
    release_free_memory()
    after = peak_rss_bytes()
    if before is not None:  # Linux: VmHWM saw the 256 MB block
        assert after is not None and after >= before and after >= 256 * 2**20


def test_freed_heap_pages_go_back_when_resident_memory_grows() -> None:
    """Small blocks (under the mmap threshold) live on the heap: after half of them are freed, glibc keeps
    their pages resident until a trim; the trimming thread notices the growth and hands them back."""
    tune_allocator()
    trimmer = trim_on_growth()
    before = resident_bytes()
    if trimmer is None or before is None:  # not glibc / no /proc: nothing to trim
        return
    with trimmer.paused():  # allocate and free before the thread looks: it then sees the whole growth
        trims = trimmer.trims
        blocks = [torch.ones(2**16) for _ in range(2048)]  # 2048 x 256 KB = 512 MB, interleaved on the heap
        held = blocks[1::2]
        del blocks
        grown = resident_bytes()
    assert grown is not None and grown - before >= 400 * 2**20  # the freed half still resident
    deadline = time.monotonic() + 10 * TRIM_CHECK_S
    while trimmer.trims == trims and time.monotonic() < deadline:
        time.sleep(TRIM_CHECK_S / 4)
    time.sleep(TRIM_CHECK_S / 4)
    after = resident_bytes()
    assert trimmer.trims > trims
    assert after is not None and grown - after >= 200 * 2**20  # about 256 MB of freed pages handed back
    assert float(held[-1][0]) == 1.0


def test_no_trim_while_a_training_step_runs() -> None:
    """Inside ``trainer_allocations`` the thread leaves freed pages alone (the step reuses them)."""
    tune_allocator()
    trimmer = trim_on_growth()
    if trimmer is None:
        return
    with trainer_allocations():
        trims = trimmer.trims
        blocks = [torch.ones(2**16) for _ in range(1024)]  # 256 MB
        del blocks[::2]
        time.sleep(4 * TRIM_CHECK_S)
        assert trimmer.trims == trims


SERVING_PROCESS = r"""
import threading
from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine
from harnessrl.models import tiny_model
from harnessrl.memory import _glibc
model, tokenizer = tiny_model()
before = {t.name for t in threading.enumerate()}
engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=2, context_window=64))
after = {t.name for t in threading.enumerate()}
print(_glibc() is not None, "harnessrl-malloc-trim" in before, "harnessrl-malloc-trim" in after)
"""


def test_a_process_that_serves_trims_without_harnessrl_train() -> None:
    """`harnessrl gateway --engine embedded` and `harnessrl collect` serve without `harnessrl train`'s setup:
    building the engine starts the trimming thread itself (a fresh process, as those commands are)."""
    out = subprocess.run([sys.executable, "-c", SERVING_PROCESS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    glibc, before, after = out.stdout.split()[-3:]
    assert before == "False"
    assert after == glibc  # started wherever the allocator is glibc
