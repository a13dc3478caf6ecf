"""Which tests a CPU kind would skip, decided without running them: the guard against CPU-dependent skips.

Why: the machines that run sessions and CI are not all one CPU kind. A test skipped only where bf16 is not
native passed the skip policy on the machine that wrote it and failed CI on the other kind (twice). With
``HARNESSRL_FORCE_NATIVE_BF16=0`` or ``1`` torch's CPU probes answer that value before any test module is
imported; ``pytest --collect-only -p cpu_kind`` with ``HARNESSRL_SKIP_REPORT=<file>`` then writes every skip
that collection (module-level skips, ``importorskip``) and the skip marks decide. Skips that differ between
the two kinds are CPU-dependent, and each must be listed in tests/allowed_skips.toml
(tests/unit/meta/test_cpu_kinds.py). A ``pytest.skip()`` called inside a test body is not seen here: keep CPU
conditions in ``skipif`` marks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _pytest.skipping import evaluate_skip_marks

FORCE_ENV = "HARNESSRL_FORCE_NATIVE_BF16"
REPORT_ENV = "HARNESSRL_SKIP_REPORT"


def force_native_bf16() -> None:
    """Make torch's CPU bf16 probes (AVX512-BF16, AMX) answer ``HARNESSRL_FORCE_NATIVE_BF16``, if set."""
    value = os.environ.get(FORCE_ENV)
    if value is None:
        return
    if value not in ("0", "1"):
        raise ValueError(f"{FORCE_ENV} must be 0 or 1, not {value!r}")
    import harnessrl  # noqa: F401, I001  (first: bounds the kernel caches before torch loads, as in any run)
    import torch

    native = value == "1"
    torch.cpu._is_avx512_bf16_supported = lambda: native
    torch.cpu._is_amx_tile_supported = lambda: native


class SkipReport:
    """Records the skips collection decides, then writes them with what ``native_bf16`` answered."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skips: dict[str, str] = {}

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            longrepr = report.longrepr
            self.skips[report.nodeid] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            skip = evaluate_skip_marks(item)
            if skip is not None:
                self.skips[item.nodeid] = skip.reason
        import torch

        from harnessrl.bf16 import native_bf16

        self.path.write_text(json.dumps({"native_bf16": native_bf16(torch.device("cpu")), "skips": self.skips}))


def pytest_configure(config: pytest.Config) -> None:
    force_native_bf16()
    report = os.environ.get(REPORT_ENV)
    if report:
        config.pluginmanager.register(SkipReport(Path(report)), "harnessrl-skip-report")
