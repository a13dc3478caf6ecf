"""torch's OpenMP threads sleep while they wait in any process that imports harnessrl before torch.

Each check runs in a fresh interpreter: libgomp reads the policy once, when torch loads it, so what
matters is the environment at that moment (benchmarks/omp_wait.py measures why).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SHOW = "import os; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"


def run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         check=True, timeout=120)
    return out.stdout.strip().splitlines()[-1]


def test_importing_harnessrl_makes_waiting_threads_sleep_before_torch_loads() -> None:
    assert run(f"import harnessrl; import torch; {SHOW}") == "PASSIVE None"
    # the CLI's entry point is inside the package, so `harnessrl train` gets it before torch
    assert run(f"import harnessrl.cli; {SHOW}") == "PASSIVE None"


def test_the_children_of_a_harnessrl_process_inherit_it() -> None:
    child = f"import subprocess, sys; print(subprocess.run([sys.executable, '-c', {SHOW!r}], capture_output=True, text=True).stdout)"
    assert run(f"import harnessrl; {child}") == "PASSIVE None"


@pytest.mark.parametrize(("knob", "value", "expected"), [
    ("OMP_WAIT_POLICY", "ACTIVE", "ACTIVE None"),
    ("GOMP_SPINCOUNT", "300000", "None 300000"),
])
def test_a_wait_policy_the_user_set_wins(knob: str, value: str, expected: str) -> None:
    assert run(f"import harnessrl; {SHOW}", **{knob: value}) == expected


def test_too_late_once_torch_is_loaded_so_nothing_pretends_otherwise() -> None:
    code = "import torch; from harnessrl.cpu_threads import sleep_while_waiting; print(sleep_while_waiting(), end=' '); " + SHOW
    # `import harnessrl.cpu_threads` runs the package's own call first; torch was already loaded, so both decline
    assert run(code) == "False None None"
