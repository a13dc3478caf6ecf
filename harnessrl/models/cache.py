"""Where prepared models live on disk, and how a folder gets there without ever being half-written.

Conversions are slow (~30 s for the packaged GGUF) and several processes (gateway, trainer, tests) may
ask for the same model at once, so a folder is built in a private temporary directory next to its final
place, marked complete, and renamed into place; a file lock makes concurrent callers wait for the first
one instead of converting twice. A folder without the completion marker is never used.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

#: Written last into a prepared folder; its presence means the folder is complete.
MARKER = "harnessrl-model.json"


def cache_root() -> Path:
    """``$HARNESSRL_CACHE`` if set, else ``$XDG_CACHE_HOME/harnessrl`` or ``~/.cache/harnessrl``."""
    env = os.environ.get("HARNESSRL_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "harnessrl"


def models_dir() -> Path:
    return cache_root() / "models"


def is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(final: Path, build: Callable[[Path], dict], *, what: str) -> Path:
    """Return ``final``, building it with ``build(tmp_dir)`` first if it is not complete yet.

    ``build`` writes the folder's files into ``tmp_dir`` and returns metadata stored in the marker.
    A crash or kill during ``build`` leaves only a temporary directory that the next call deletes.
    """
    if is_complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(final.parent / f".{final.name}.lock"):
        if is_complete(final):  # another process finished it while we waited
            return final
        for stale in final.parent.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # incomplete leftover from an older, non-atomic writer
            shutil.rmtree(final, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            logger.info("preparing %s in %s (one time)", what, final)
            meta = build(tmp)
            (tmp / MARKER).write_text(json.dumps(meta, indent=2, sort_keys=True))
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
