"""oneDNN's kernel caches are bounded in any process that imports harnessrl before torch.

Each check runs in a fresh interpreter: the caches read their capacity from the environment, so what
matters is the environment when torch starts using them.
"""

from __future__ import annotations

import os
import subprocess
import sys

from harnessrl.engines.config import EngineConfig
from harnessrl.kernel_caches import CAPACITY, KNOBS

SHOW = "import os; print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'), os.environ.get('LRU_CACHE_CAPACITY'))"

# 200 distinct matmul shapes in DTYPE, forward and backward, two passes: resident growth after malloc_trim
GROWTH = """
import ctypes, torch
def rss(): return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024
torch.set_num_threads(1)
w, x0 = torch.randn(1536, 576, dtype=torch.DTYPE), rss()
for _ in range(2):
    for m in range(100, 1100, 5):
        x = torch.randn(m, 576, dtype=torch.DTYPE, requires_grad=True)
        torch.nn.functional.linear(x, w).sum().backward()
ctypes.CDLL('libc.so.6').malloc_trim(0)
print(round(rss() - x0))
"""


def run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in KNOBS}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         check=True, timeout=300)
    return out.stdout.strip().splitlines()[-1]


def test_importing_harnessrl_bounds_both_caches_and_a_value_the_user_set_wins() -> None:
    assert run(f"import harnessrl; import torch; {SHOW}") == f"{CAPACITY} {CAPACITY}"
    assert run(f"import harnessrl.cli; {SHOW}") == f"{CAPACITY} {CAPACITY}"
    assert run(f"import harnessrl; {SHOW}", LRU_CACHE_CAPACITY="1024") == f"{CAPACITY} 1024"
    code = "import torch; from harnessrl.kernel_caches import bound_kernel_caches; print(bound_kernel_caches(), end=' '); " + SHOW
    assert run(code) == "False None None"  # too late once torch is loaded, and nothing pretends otherwise


def test_the_dtype_the_engine_runs_here_keeps_no_pile_of_compiled_kernels() -> None:
    """Many shapes in the dtype ``auto`` resolves to on this CPU (the engine's and the trainer's) stay bounded.

    Where bf16 is native, bf16 matmuls go through oneDNN's JIT, one primitive per shape: the bound is what
    keeps them (the default caches kept 255 MB for these 200 shapes). Elsewhere ``auto`` is float32, whose
    matmuls go through BLAS with no per-shape kernel (measured on a 2-core AMD EPYC without avx512_bf16: 18 MB
    either way, and emulated bf16 9 MB either way in 260 s), so there the check is that this path keeps none.
    """
    dtype = EngineConfig().embedded_dtype()
    bounded = int(run("import harnessrl\n" + GROWTH.replace("DTYPE", dtype)))
    assert bounded < 100, f"{bounded} MB kept for 200 {dtype} shapes with the caches bounded"
    if dtype == "bfloat16":  # only here do the caches hold compiled kernels: the bound must make a difference
        default = int(run(GROWTH.replace("DTYPE", dtype)))  # torch's defaults: 1,024 entries in each cache
        assert default > 2 * bounded, f"default {default} MB against {bounded} MB: the bound no longer matters?"
