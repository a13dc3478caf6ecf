"""A CPU-dependent skip fails on every machine, not only on the CPU kind that takes it (tests/cpu_kind.py).

The whole suite is collected twice, with torch's bf16 probes forced to "native" and to "not native"; the
skips that differ are the CPU-dependent ones, and the skip policy's own check must accept each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cpu_kind import FORCE_ENV, REPORT_ENV
from skip_policy import load_allowed, unexpected_skips

TESTS = Path(__file__).resolve().parents[2]

CPU_DEPENDENT = """
import pytest, torch
from harnessrl.bf16 import native_bf16

@pytest.mark.skipif(not native_bf16(torch.device("cpu")), reason="only where bf16 is native")
def test_bf16_only(): pass

def test_everywhere(): pass
"""


def collect_skips(paths: list[str], cwd: Path, tmp: Path) -> dict[bool, dict]:
    """``{forced value: report}``: both collections run side by side, each in a fresh interpreter."""
    runs = {}
    for native in (False, True):
        report = tmp / f"skips_{int(native)}.json"
        env = {**os.environ, FORCE_ENV: str(int(native)), REPORT_ENV: str(report),
               "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
        env.pop("HARNESSRL_FAIL_ON_SKIP", None)
        cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "cpu_kind", "-p", "no:cacheprovider",
               *paths]
        runs[native] = (report, subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True))
    out = {}
    for native, (report, proc) in runs.items():
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"collection with native bf16 forced to {native} failed:\n{log[-3000:]}"
        out[native] = json.loads(report.read_text())
    return out


def cpu_dependent(reports: dict[bool, dict]) -> list[tuple[str, str]]:
    """The skips that one CPU kind takes and the other does not, with their reasons."""
    off, on = reports[False]["skips"], reports[True]["skips"]
    return sorted({(n, r) for n, r in off.items() if n not in on} | {(n, r) for n, r in on.items() if n not in off})


def test_the_guard_finds_a_skip_that_only_one_cpu_kind_takes(tmp_path: Path) -> None:
    """Without this the guard below could pass by seeing nothing (a force that did not take, say)."""
    (tmp_path / "test_cpu_module.py").write_text(CPU_DEPENDENT)
    reports = collect_skips(["test_cpu_module.py"], tmp_path, tmp_path)
    assert reports[False]["native_bf16"] is False and reports[True]["native_bf16"] is True
    found = cpu_dependent(reports)
    assert found == [("test_cpu_module.py::test_bf16_only", "only where bf16 is native")]
    assert unexpected_skips(found, load_allowed()) == found  # nothing in the allow-list covers it


def test_no_test_in_the_suite_skips_by_cpu_kind_unless_listed(tmp_path: Path) -> None:
    reports = collect_skips([str(TESTS)], TESTS.parent, tmp_path)
    assert reports[False]["native_bf16"] is False and reports[True]["native_bf16"] is True
    bad = unexpected_skips(cpu_dependent(reports), load_allowed())
    assert not bad, ("skips that depend on the CPU kind, not in tests/allowed_skips.toml (make the test pass on "
                     f"both kinds, or list it with the exact reason): {bad}")
