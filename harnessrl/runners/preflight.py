"""Checks before a run starts: a harness or verifier that cannot start should fail the run in a second.

Without them every attempt of every step fails as ``infra`` (never trained, so nothing is wrong with the
data) and the run trains on nothing while the model loads and steps tick by. Only what can be known up
front is checked: a bare command name must be on the PATH the process will get, an absolute path must be an
executable file. A relative path with a slash (``./run.sh``) names a file in each attempt's workspace,
which exists only once the attempt starts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence


class CommandNotFound(ValueError):
    """A configured command cannot be executed; the message says which and where it was looked for."""


def check_command(argv: Sequence[str], env: Mapping[str, str], what: str) -> None:
    """Raise ``CommandNotFound`` when ``argv[0]`` certainly cannot be executed with ``env``'s PATH."""
    if not argv:
        raise CommandNotFound(f"{what} is empty: give the program and its arguments, e.g. [\"python\", \"agent.py\"]")
    program = str(argv[0])
    if os.path.isabs(program):
        if not os.path.isfile(program):
            raise CommandNotFound(f"{what}: {program} does not exist")
        if not os.access(program, os.X_OK):
            raise CommandNotFound(f"{what}: {program} is not executable (chmod +x, or run it with its interpreter)")
        return
    if os.sep in program:
        return  # relative to the attempt's workspace: checked when the attempt starts
    path = env.get("PATH", os.defpath)
    if shutil.which(program, path=path) is None:
        raise CommandNotFound(f"{what}: {program!r} is not found on the PATH the process gets ({path})")
