"""What grading in a container returns (``Grade``), and the container it grades in (``Box``).

A grader (Harbor's reward file, SWE-bench's resolution rule) needs only a few things of a container: run a
command in it, put files in, read a file back. ``Box`` is that narrow seam; ``container.Container`` is the
real one (Podman/Docker), and a Kubernetes verifier container grades by the same rules with its own
process. A ``Grade`` with ``value`` None is a grading failure (an infra failure: the agent is not scored on
a broken test); its ``error`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Grade:
    """The verifier reward of one attempt (None: grading failed, ``error`` says why) and its output."""

    value: float | None
    output: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ExecResult:
    """A command run in a container: exit status (None when stopped at its timeout) and its output tail."""

    exit_code: int | None
    output: str
    timed_out: bool = False


class Box(Protocol):
    """A running container a grader works in."""

    async def exec(self, argv: list[str], *, timeout_s: float, workdir: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """Run ``argv`` in the container (stdout and stderr together, the tail kept)."""
        ...

    async def put(self, source: Path, dest: str) -> None:
        """Copy a host file or folder to ``dest`` in the container (a folder's contents become ``dest``)."""
        ...

    async def read(self, path: str, limit_bytes: int = 1 << 20) -> bytes | None:
        """A file's bytes from the container (None when it does not exist)."""
        ...
