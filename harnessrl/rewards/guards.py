"""Tamper check: protected files after the harness exits must be exactly what they were before launch.

The runner records sha256 digests of every file matching the protected globs in the fresh workspace
copy before the harness starts (``AttemptResult.protected_sha256``); here we hash again. Modified,
deleted and newly created matching files all count (a new ``tests/conftest.py`` can subvert tests as
well as an edited one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from harnessrl.runners.workspace import checksum_globs


def find_tampering(workdir: Path, globs: Iterable[str], before: Mapping[str, str]) -> list[str]:
    """Human-readable changes (``"modified: tests/test_a.py"``), sorted; empty when untouched."""
    after = checksum_globs(workdir, globs)
    changes = [f"deleted: {p}" for p in before if p not in after]
    changes += [f"modified: {p}" for p in before if p in after and after[p] != before[p]]
    changes += [f"added: {p}" for p in after if p not in before]
    return sorted(changes, key=lambda c: c.split(": ", 1)[1])
