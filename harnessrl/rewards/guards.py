"""Tamper checks: protected files after the harness exits must be exactly what they were before launch,
and nothing the harness left may redirect where harnessrl (unsandboxed) writes the hidden files.

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


def symlinks_in_the_way(hidden_dir: Path, workdir: Path, subdir: str = "") -> list[str]:
    """Workspace paths (relative) where copying ``hidden_dir`` into ``workdir/subdir`` would go through a
    symlink the harness planted: the copy runs as harnessrl, outside any sandbox, so following one would
    write the hidden files wherever it points. Sorted; empty when the way is clear."""
    found: list[str] = []
    here = workdir
    for part in Path(subdir).parts:
        here = here / part
        if here.is_symlink():
            return [here.relative_to(workdir).as_posix()]
    dest = workdir / subdir
    for path in sorted(hidden_dir.rglob("*")):  # parents before children
        target = dest / path.relative_to(hidden_dir)
        if target.is_symlink() and not any(target.is_relative_to(workdir / f) for f in found):
            found.append(target.relative_to(workdir).as_posix())
    return found
