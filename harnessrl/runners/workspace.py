"""Attempt directories: a fresh copy of the task workspace per attempt, and checksums of protected files.

Layout of one attempt (the harness only learns about ``workspace/``, its cwd, and the input file)::

    <workdir_root>/<rollout_id>/workspace/        the harness's cwd (a copy of the task workspace)
    <workdir_root>/<rollout_id>/task_input.json   the task input (HARNESSRL_TASK_INPUT_FILE)
    <workdir_root>/<rollout_id>/stdout.txt        output tails, written after the harness exits
    <workdir_root>/<rollout_id>/stderr.txt

These functions block on disk I/O; async callers run them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


class WorkspaceError(Exception):
    """The attempt directory could not be prepared (missing workspace, disk full, bad glob)."""


def prepare_attempt_dir(
    root: Path, rollout_id: str, workspace: Path | None, task_input: Mapping[str, Any]
) -> tuple[Path, Path, Path]:
    """Create ``root/rollout_id`` from scratch; returns (attempt dir, workdir, task input file)."""
    attempt_dir = root / rollout_id
    try:
        if attempt_dir.exists():  # a re-run of the same rollout id starts clean, never from old files
            shutil.rmtree(attempt_dir)
        attempt_dir.mkdir(parents=True)
        workdir = attempt_dir / "workspace"
        if workspace is not None:
            if not workspace.is_dir():
                raise WorkspaceError(f"task workspace {workspace} is not a directory")
            shutil.copytree(workspace, workdir, symlinks=True)
        else:
            workdir.mkdir()
        input_file = attempt_dir / "task_input.json"
        input_file.write_text(json.dumps(dict(task_input), ensure_ascii=False))
    except OSError as exc:
        raise WorkspaceError(f"could not prepare attempt directory {attempt_dir}: {exc}") from exc
    return attempt_dir, workdir, input_file


def copy_into(src: Path, dest: Path) -> None:
    """Merge the contents of ``src`` into ``dest`` (overwriting): how hidden files are placed.

    Never through a symlink at the destination (the harness may have left one pointing anywhere, and this
    runs as harnessrl): checked just before, and again per file.
    """
    if not src.is_dir():
        raise WorkspaceError(f"hidden directory {src} is not a directory")
    if dest.is_symlink() or any((dest / p.relative_to(src)).is_symlink() for p in src.rglob("*")):
        raise WorkspaceError(f"refusing to copy hidden files into {dest}: a symlink is in the way")

    def copy_file(source: str, target: str) -> object:
        if os.path.islink(target):
            raise WorkspaceError(f"refusing to copy a hidden file over the symlink {target}")
        return shutil.copy2(source, target)

    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True, copy_function=copy_file)


def _digest(path: Path) -> str:
    if path.is_symlink():  # a swapped-in symlink must not hash as its target
        return "symlink:" + os.readlink(path)
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _linked_ancestor(workdir: Path, path: Path) -> Path | None:
    """The first folder between ``workdir`` and ``path`` that is a symlink, if any."""
    here = workdir
    for part in path.relative_to(workdir).parts[:-1]:
        here = here / part
        if here.is_symlink():
            return here
    return None


def checksum_globs(workdir: Path, globs: Iterable[str]) -> dict[str, str]:
    """sha256 of every file under ``workdir`` matching one of ``globs`` (relative, ``**`` allowed)."""
    found: dict[str, str] = {}
    for pattern in globs:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise WorkspaceError(
                f"protected glob {pattern!r} must be relative to the workspace, without '..'"
            )
        for path in workdir.glob(pattern):
            link = _linked_ancestor(workdir, path)
            if link is not None:  # never read through a link the harness may have planted (it can point
                rel = link.relative_to(workdir).as_posix()  # anywhere harnessrl can read): the link counts
                found.setdefault(rel, "symlink:" + os.readlink(link))
                continue
            if path.is_file() or path.is_symlink():
                rel = path.relative_to(workdir).as_posix()
                if rel not in found:
                    try:
                        found[rel] = _digest(path)
                    except OSError as exc:  # unreadable counts as changed, never as "fine"
                        found[rel] = f"unreadable:{exc.errno}"
    return found
