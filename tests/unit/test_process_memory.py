"""The allocator settings around a training step: harmless where glibc is absent, and a real peak reading."""

from __future__ import annotations

import torch

from harnessrl.memory import peak_rss_bytes, release_free_memory, trainer_allocations, tune_allocator


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
