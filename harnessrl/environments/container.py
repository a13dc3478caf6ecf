"""One attempt's container: made from its task image, kept alive by a tiny PID 1, the harness ``exec``-ed in.

Why ``exec`` into a living container rather than ``run`` the harness as the container's command: the
task's tests must run in the same container after the harness has exited (Harbor's semantics), with
whatever the harness left behind. PID 1 is the host's Python (mounted read-only with ``-I -S``: the image
needs nothing) pausing with SIGCHLD ignored, so the kernel reaps orphans and a fork bomb's zombies do not
pin the PID limit. Everything the container holds goes when ``remove`` runs (``rm -f -t 0``).
"""

from __future__ import annotations

import io
import logging
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harnessrl.environments.engine import Engine, EngineError, label_args
from harnessrl.environments.grade import ExecResult

logger = logging.getLogger(__name__)

#: The keep-alive PID 1 (host Python, stdlib only). Marked so ``stop_processes`` spares it.
KEEPALIVE = ("import signal; signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # harnessrl-keepalive\n"
             "while True: signal.pause()")
#: Kills every process of the container but PID 1 and itself: the harness's leftovers after a timeout.
STOP_ALL = ("import os, signal\nme = os.getpid()\nfor _ in range(50):\n  left = 0\n"
            "  for p in os.listdir('/proc'):\n    if p.isdigit() and int(p) not in (1, me):\n"
            "      try: os.kill(int(p), signal.SIGKILL); left += 1\n      except OSError: pass\n"
            "  if not left: break\n")


def host_python() -> str:
    """The interpreter a container borrows from the host (its base install: stdlib is enough with -I -S)."""
    base = Path(sys.base_prefix)
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        if (base / "bin" / name).exists():
            return str(base / "bin" / name)
    return str(Path(sys.executable).resolve())


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """What one container is made of. ``mounts``: (host path, container path, read-only)."""

    image: str
    name: str
    labels: Mapping[str, str]
    workdir: str
    mounts: Sequence[tuple[str, str, bool]] = ()
    network: str = "none"
    cpus: float | None = None
    memory_mb: int | None = None
    pids_limit: int | None = None
    user: str | None = None
    extra_args: Sequence[str] = ()


@dataclass
class Container:
    """A created and started container of the engine; satisfies ``grade.Box``."""

    engine: Engine
    name: str
    workdir: str
    image: str
    python: str = field(default_factory=host_python)
    #: The clean-grading seam: set by the runner, read by ``grading.grade_attempt``.
    clean: bool = False
    spec: ContainerSpec | None = None
    #: The task's own image (without an installed harness): clean grading starts from it.
    grade_image: str = ""

    @classmethod
    async def start(cls, engine: Engine, spec: ContainerSpec, *, timeout_s: float = 120.0) -> Container:
        """Create and start the container; on failure nothing of it is left (``EngineError``)."""
        py = host_python()
        args = ["create", "--name", spec.name, *label_args(spec.labels), "--network", spec.network,
                "--workdir", spec.workdir, "--entrypoint", py, "--stop-timeout", "0"]
        if spec.pids_limit:
            args += ["--pids-limit", str(spec.pids_limit)]
        if spec.cpus:
            args += ["--cpus", f"{spec.cpus:g}"]
        if spec.memory_mb:
            args += ["--memory", f"{spec.memory_mb}m", "--memory-swap", f"{spec.memory_mb}m"]
        if spec.user:
            args += ["--user", spec.user]
        base = str(Path(py).parent.parent)
        mounts = [(base, base, True), *spec.mounts]
        seen: set[str] = set()
        for host, inside, ro in mounts:
            if inside in seen:
                continue
            seen.add(inside)
            args += ["-v", f"{host}:{inside}:{'ro' if ro else 'rw'}"] if host != "tmpfs" else ["--tmpfs", inside]
        args += [*spec.extra_args, spec.image, "-I", "-S", "-c", KEEPALIVE]
        box = cls(engine, spec.name, spec.workdir, spec.image, python=py, spec=spec)
        try:
            await engine.run(*args, timeout_s=timeout_s)
            await engine.run("start", spec.name, timeout_s=timeout_s)
            made = await engine.run("exec", spec.name, py, "-I", "-S", "-c", "import os,sys; os.makedirs(sys.argv[1], "
                                    "exist_ok=True)", spec.workdir, timeout_s=60, check=False)
            if made.returncode != 0:  # PID 1 may have died at once: say why, from the engine's own record
                state = await engine.run("inspect", "--format", "{{.State.Status}} (exit {{.State.ExitCode}}): "
                                         "{{.State.Error}}", spec.name, timeout_s=60, check=False)
                raise EngineError(f"the container did not stay up: {state.text.strip() or made.stderr.strip()}")
        except BaseException:
            await box.remove()
            raise
        return box

    async def exec(self, argv: list[str], *, timeout_s: float, workdir: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        args = ["exec", "--workdir", workdir or self.workdir]
        client_env = None
        if env:
            import os
            client_env = {**os.environ, **env}
            args += [a for n in env for a in ("-e", n)]
        if user:
            args += ["--user", user]
        done = await self.engine.run(*args, self.name, *argv, timeout_s=timeout_s, env=client_env, check=False,
                                     limit_bytes=256 << 10)
        if done.returncode is None:
            await self.stop_processes()
        output = done.text + (("\n" + done.stderr) if done.stderr.strip() else "")
        return ExecResult(done.returncode, output, timed_out=done.returncode is None)

    async def stop_processes(self) -> None:
        """Kill everything the harness (or the tests) left running; PID 1 stays for the grading."""
        await self.engine.run("exec", self.name, self.python, "-I", "-S", "-c", STOP_ALL, timeout_s=60, check=False)

    async def put(self, source: Path, dest: str) -> None:
        """``source`` (a file, or a folder whose contents become ``dest``) into the container."""
        if source.is_dir():
            await self.engine.run("exec", self.name, self.python, "-I", "-S", "-c",
                                  "import os,sys; os.makedirs(sys.argv[1], exist_ok=True)", dest, timeout_s=60)
            await self.engine.run("cp", f"{source}/.", f"{self.name}:{dest}", timeout_s=300)
        else:
            await self.engine.run("cp", str(source), f"{self.name}:{dest}", timeout_s=300)

    async def read(self, path: str, limit_bytes: int = 1 << 20) -> bytes | None:
        """A file of the container (through ``cp ... -``: a tar stream, so the image needs no ``cat``)."""
        done = await self.engine.run("cp", f"{self.name}:{path}", "-", timeout_s=120, check=False,
                                     limit_bytes=limit_bytes + (1 << 16))
        if done.returncode != 0:
            return None
        try:
            with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                got = tar.extractfile(member) if member is not None else None
                return got.read()[:limit_bytes] if got is not None else None
        except (tarfile.TarError, EOFError):
            return None

    async def export_workdir(self) -> Path:
        """The workdir as a tar file on the host (the attempt's changes, for clean grading)."""
        done = await self.engine.run("cp", f"{self.name}:{self.workdir}", "-", timeout_s=600, limit_bytes=4 << 30)
        with tempfile.NamedTemporaryFile(prefix="hrl-workdir-", suffix=".tar", delete=False) as f:
            f.write(done.stdout)
        return Path(f.name)

    async def import_workdir(self, tar: Path) -> None:
        """Replace the workdir with the tar of ``export_workdir`` (emptied first: deletions count too)."""
        await self.engine.run("exec", self.name, self.python, "-I", "-S", "-c",
                              "import os,shutil,sys\nd=sys.argv[1]\nfor n in os.listdir(d):\n p=os.path.join(d,n)\n"
                              " shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)",
                              self.workdir, timeout_s=300)
        parent = str(Path(self.workdir).parent)
        await self.engine.run("cp", "-", f"{self.name}:{parent}", stdin=tar.read_bytes(), timeout_s=600)

    async def remove(self) -> None:
        """Remove the container and all it holds; never raises (cleanup must not fail an attempt)."""
        try:
            await self.engine.remove(self.name)
        except (OSError, EngineError) as exc:
            logger.warning("could not remove container %s: %s", self.name, exc)
