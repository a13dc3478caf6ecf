"""A test run that cannot pass by skipping: with ``HARNESSRL_FAIL_ON_SKIP=1`` (CI sets it) every skip must be
listed in ``tests/allowed_skips.toml`` with a reason, or the run fails.

Why: a skip guarded by "is X installed?" turns a broken install into a green run. CI installs everything
its tests need, so there a skip means something is missing; locally skips stay skips.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

import pytest

ENV = "HARNESSRL_FAIL_ON_SKIP"
ALLOWED_FILE = Path(__file__).with_name("allowed_skips.toml")


def load_allowed(path: Path = ALLOWED_FILE) -> list[tuple[str, str]]:
    """``(nodeid pattern, why)`` pairs; every entry needs a reason, so an allowance is never silent."""
    entries = tomllib.loads(path.read_text()).get("skip", [])
    allowed = []
    for entry in entries:
        if not entry.get("test") or not entry.get("why"):
            raise ValueError(f"{path}: every [[skip]] needs 'test' (a node id pattern) and 'why': {entry}")
        allowed.append((entry["test"], entry["why"]))
    return allowed


def unexpected_skips(skipped: list[tuple[str, str]], allowed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(nodeid, reason)`` skips that no allowed pattern covers."""
    return [(nodeid, reason) for nodeid, reason in skipped
            if not any(fnmatch.fnmatchcase(nodeid, pattern) for pattern, _ in allowed)]


class SkipPolicy:
    """Collects skips during the run; at the end fails the session for any that is not allowed."""

    def __init__(self) -> None:
        self.skipped: list[tuple[str, str]] = []
        self.bad: list[tuple[str, str]] = []

    def _note(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.skipped.append((report.nodeid, reason))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._note(report)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped whole (``importorskip``, ``skip(allow_module_level=True)``) reports here."""
        self._note(report)

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.bad = unexpected_skips(self.skipped, load_allowed())
        if self.bad and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if self.bad:
            terminalreporter.section(f"{ENV}=1: skipped tests not in tests/allowed_skips.toml", red=True)
            for nodeid, reason in self.bad:
                terminalreporter.line(f"{nodeid}: {reason}")


def pytest_configure(config: pytest.Config) -> None:
    """Registered from tests/conftest.py (or ``-p skip_policy``); only acts when the variable is set."""
    if os.environ.get(ENV) == "1":
        config.pluginmanager.register(SkipPolicy(), "harnessrl-skip-policy")
