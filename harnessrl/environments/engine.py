"""The container engine: Podman or Docker, spoken to through their shared command line.

Why the CLI and not a client library (docs/containers-choices.md has the figures):
both engines take the same ``create``/``exec``/``cp``/``build`` arguments, so one code path serves both;
Podman needs no daemon for its CLI, while docker-py and podman-py need Podman's API service running; and the
CLI adds no dependency to install. Every call is bounded in time and output, and a missing or broken engine
is one ``EngineUnavailable`` that names it and the fix.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

#: Labels on everything an attempt creates: the sweep finds a killed controller's containers by them.
LABEL_RUN, LABEL_ROLLOUT, LABEL_OWNER = "harnessrl.run", "harnessrl.rollout", "harnessrl.owner"
_OUTPUT_LIMIT = 1 << 20


class EngineUnavailable(RuntimeError):
    """No usable Podman or Docker here; the message names what was tried and what to install."""


class EngineError(RuntimeError):
    """One engine command failed (the message holds the command and the tail of its output)."""


@dataclass(frozen=True, slots=True)
class Completed:
    """One engine command's outcome: exit status (None when stopped at its timeout) and output tails."""

    returncode: int | None
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Engine:
    """A container engine's CLI (``podman`` or ``docker``) and how to call it."""

    name: str
    binary: str

    async def run(self, *args: str, timeout_s: float = 120.0, stdin: bytes | None = None,
                  env: Mapping[str, str] | None = None, check: bool = True,
                  limit_bytes: int = _OUTPUT_LIMIT) -> Completed:
        """Run ``<engine> args...``; ``EngineError`` on a non-zero exit when ``check`` (never on a timeout:
        the caller decides what a timeout means). Output beyond ``limit_bytes`` keeps its tail."""
        proc = await asyncio.create_subprocess_exec(
            self.binary, *args, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None)
        out, err = bytearray(), bytearray()

        async def pump(stream: asyncio.StreamReader | None, buf: bytearray, limit: int) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                buf += chunk
                if len(buf) > 2 * limit:  # keep the tail; trimmed rarely
                    del buf[:len(buf) - limit]

        async def feed() -> None:
            if stdin is not None and proc.stdin is not None:
                try:
                    proc.stdin.write(stdin)
                    await proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                proc.stdin.close()

        work = asyncio.gather(pump(proc.stdout, out, limit_bytes), pump(proc.stderr, err, 64 << 10), feed(), proc.wait())
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout_s)
            code: int | None = proc.returncode
        except TimeoutError:
            code = None
            proc.kill()
            await asyncio.wait({work}, timeout=10.0)
        except BaseException:
            proc.kill()
            raise
        done = Completed(code, bytes(out[-limit_bytes:]), bytes(err[-(64 << 10):]).decode("utf-8", "replace"))
        if check and code not in (0, None):
            raise EngineError(f"{self.name} {' '.join(_short(a) for a in args[:6])}: exit {code}: "
                              f"{done.stderr.strip()[-2000:]}")
        return done

    async def remove(self, name: str, *, timeout_s: float = 120.0) -> Completed:
        """Remove a container and all it holds at once (no stop timeout), whether it runs or not."""
        now = ["-t", "0"] if self.name == "podman" else []  # docker's rm -f kills at once
        return await self.run("rm", "-f", *now, name, check=False, timeout_s=timeout_s)

    def argv(self, *args: str) -> list[str]:
        """The full command line (for a process the runner watches itself, e.g. the harness's ``exec``)."""
        return [self.binary, *args]


def _short(arg: str) -> str:
    return arg if len(arg) <= 80 else arg[:77] + "..."


@functools.cache
def _probe(binary: str) -> str | None:
    """None when the engine answers ``version`` here (Docker's asks its daemon); else its error. Not ``info``:
    it takes the storage lock and took over 60 s on a loaded 2-core machine."""
    try:
        out = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if out.returncode == 0 else (out.stderr.strip()[-600:] or f"exit code {out.returncode}")


def find_engine(choice: str = "auto") -> Engine:
    """The engine for ``[runner.container] engine``: ``auto`` takes podman, else docker, whichever works.

    Raises ``EngineUnavailable`` naming each engine tried and why it did not answer."""
    names = ["podman", "docker"] if choice == "auto" else [choice]
    problems = []
    for name in names:
        binary = shutil.which(name)
        if binary is None:
            problems.append(f"{name}: not installed")
            continue
        problem = _probe(binary)
        if problem is None:
            return Engine(name, binary)
        problems.append(f"{name} ({binary}): {problem}")
    raise EngineUnavailable(
        '[runner] environment = "container" needs Podman or Docker, and none works here: ' + "; ".join(problems)
        + ". Install one (e.g. `bash scripts/podman.sh`, or apt-get install podman runc), or set [runner] "
        'environment = "host"')


def label_args(labels: Mapping[str, str]) -> list[str]:
    return [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]


def env_names_args(names: Sequence[str]) -> list[str]:
    """``-e NAME`` for each variable: the value comes from the engine client's own environment, so a
    rollout's key never appears on a command line (``ps`` shows those to every user)."""
    return [a for n in names for a in ("-e", n)]
