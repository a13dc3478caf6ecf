"""The container runner: each local attempt in its task's image, under Podman or Docker.

Per attempt: the task's image (built once per content, ``environments/images.py``), a container made from
it with the task's limits and the run's labels (``environments/container.py``), the task's workspace copied
into its workdir when the task brings one, and the unmodified harness ``exec``-ed there with the rollout's
environment. The container has no network (``--network none``): inside it a relay listens on the gateway's
port at 127.0.0.1 and forwards, over a unix socket mounted into the container, to the gateway, so
``OPENAI_BASE_URL`` works unchanged and nothing else is reachable. A task that asks for the internet gets the
engine's default network when ``[runner.container] allow_internet`` grants it (the host's loopback stays
unreachable). The container lives on after the harness for grading (``rewards/container_grading.py``) and is
removed at ``release``; one a killed controller left is removed by the next runner's start (``sweep``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harnessrl.environments import storage
from harnessrl.environments.container import Container, ContainerSpec, host_python
from harnessrl.environments.engine import (
    LABEL_OWNER,
    LABEL_ROLLOUT,
    LABEL_RUN,
    Engine,
    EngineError,
    env_names_args,
    find_engine,
)
from harnessrl.environments.images import ImageError, ImageResolver
from harnessrl.environments.pool import WarmPool
from harnessrl.environments.task_env import TaskEnvironment
from harnessrl.runners.base import OnStart
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.env import TASK_INPUT_FILE_VAR, base_env, task_input_env
from harnessrl.runners.local import LocalRunner, _write_tails
from harnessrl.runners.process import ProcessStartError, describe_exit, run_process
from harnessrl.runners.sandbox import FORWARDER, GatewayBridge, command_dirs, gateway_port, loopback_env
from harnessrl.runners.spec import AttemptResult, AttemptSpec, unfinished_result
from harnessrl.runners.workspace import WorkspaceError, prepare_attempt_dir
from harnessrl.types import FailureKind, RolloutStatus

logger = logging.getLogger(__name__)

#: Inside every container: the gateway's socket folder and the task input file.
RUN_INSIDE = "/run/harnessrl"
SOCKET_DIR_INSIDE, INPUT_INSIDE = f"{RUN_INSIDE}/gw", f"{RUN_INSIDE}/task_input.json"
#: The PATH a harness gets inside (the image's usual one, the venv's bin first when it is mounted).
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Variables given on the engine's command line (not secret); the rest come from the client's environment.
_PLAIN = ("PATH", "HOME", "TMPDIR")


def _why(exc: BaseException, image: str) -> str:
    """What a failed start most likely means: the container's PID 1 and relay are the host's Python, mounted
    read-only, so an image without the host's C library (musl: Alpine; none: scratch) cannot run them."""
    text = str(exc).lower()
    if any(s in text for s in ("did not stay up", "no such file or directory", "exec format error")):
        return (f" (the container runs the host's Python, {host_python()}, mounted read-only: {image} must be a "
                "glibc-based image like the host, e.g. Debian or Ubuntu; a musl (Alpine) or empty (scratch) image "
                "cannot run it, nor the host's venv or Node)")
    return ""


def owner_label() -> str:
    """This controller process, as ``host/pid/start-time``: a sweep knows a dead owner by it."""
    return f"{socket.gethostname()}/{os.getpid()}/{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition("/")
    pid, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: not ours to judge
    return _start_time(int(pid)) == started


async def sweep(engine: Engine, run_id: str | None = None) -> list[str]:
    """Remove the containers that controllers killed on this machine left (their owner is dead), and every
    container of ``run_id`` (a restarted run's attempts are failed as infra at resume). Returns their names."""
    done = await engine.run("ps", "-a", "--filter", f"label={LABEL_OWNER}", "--format",
                            f'{{{{.Names}}}}\t{{{{index .Labels "{LABEL_OWNER}"}}}}\t{{{{index .Labels "{LABEL_RUN}"}}}}',
                            check=False, timeout_s=60)
    gone = []
    for line in done.text.splitlines():
        name, owner, run = (line.split("\t") + ["", ""])[:3]
        if name and (not _owner_alive(owner) or (run_id is not None and run == run_id and owner != owner_label())):
            await engine.remove(name)
            gone.append(name)
    if gone:
        logger.info("removed %d containers left by killed controllers: %s", len(gone), ", ".join(gone[:10]))
    return gone


class ContainerRunner(LocalRunner):
    """Local attempts in their task's container; queueing and cancel as ``LocalRunner``'s."""

    def __init__(self, config: RunnerConfig, workdir_root: Path | str | None = None, *, run_id: str = "default",
                 hide: Sequence[Path | str] = ()) -> None:
        """Raises ``EngineUnavailable`` (naming the engines tried) when neither Podman nor Docker works."""
        self.config = config
        self.workdir_root = Path(workdir_root if workdir_root is not None else config.workdir_root).resolve()
        self.sandbox = None
        self.run_id = run_id
        self.hide = [Path(p).resolve() for p in (*hide, self.workdir_root)]
        self.engine = find_engine(config.container.engine)
        self.images = ImageResolver(self.engine, config.container)
        self.owner = owner_label()
        self._slots = asyncio.Semaphore(config.concurrency)
        self._cancels: dict[str, asyncio.Event] = {}
        self._swept = False
        self.pool = WarmPool(self.engine, config.container.pool_size, RUN_INSIDE) if config.container.pool_size \
            else None
        logger.info("attempts run in their task's container (%s); network: the gateway only", self.engine.binary)

    def _mounts(self, command: Sequence[str]) -> list[tuple[str, str, bool]]:
        """Read-only host paths the harness needs (``harness = "mount"``), with hidden paths masked."""
        cfg = self.config.container
        if cfg.harness != "mount":
            return []
        from harnessrl.runners.sandbox import python_paths

        paths = [*python_paths(), *command_dirs(command), *(Path(p).resolve() for p in cfg.mounts)]
        mounts: list[tuple[str, str, bool]] = []
        paths = [p for p in dict.fromkeys(paths) if p.exists() and p not in self.hide]
        for p in paths:
            mounts.append((str(p), str(p), True))
        for h in self.hide:  # a config (store URL, keys) or the run dir beside the harness: masked
            if h.exists() and any(p in h.parents for p in paths):
                mounts.append(("tmpfs", str(h), False) if h.is_dir() else ("/dev/null", str(h), True))
        return mounts

    async def _run_started(self, spec: AttemptSpec, cancel: asyncio.Event, on_start: OnStart | None) -> AttemptResult:
        cfg, ccfg = self.config, self.config.container
        started = time.monotonic()
        if not self._swept:
            self._swept = True
            await sweep(self.engine, self.run_id)
        try:
            attempt_dir, workdir, input_file = await asyncio.to_thread(
                prepare_attempt_dir, self.workdir_root, spec.rollout_id, spec.assets.workspace, spec.task_input)
        except WorkspaceError as exc:
            return unfinished_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, str(exc), started=started)
        task_env = spec.assets.environment
        try:
            image = await self.images.image_for(task_env)
            grade_image = await self.images.task_image(task_env)
            inspected = await self.engine.run("image", "inspect", "--format", "{{.Config.WorkingDir}}", image,
                                              timeout_s=60)
        except (ImageError, EngineError) as exc:
            return unfinished_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, str(exc), started=started,
                                     attempt_dir=attempt_dir)
        inside_dir = (task_env.workdir if task_env is not None and task_env.workdir else None) \
            or inspected.text.strip() or "/"
        wants_net = task_env is not None and task_env.allow_internet and ccfg.allow_internet
        bridge: GatewayBridge | None = None
        box: Container | None = None
        over: list[int] = []  # bytes written, once past the storage limit
        common: dict[str, Any] = {"attempt_dir": attempt_dir, "workdir": None}
        try:
            gateway = gateway_port(spec.env)
            mounts = self._mounts(spec.command)
            mounts.append((str(input_file), INPUT_INSIDE, True))
            if gateway is not None:
                bridge = GatewayBridge(*gateway)
                sock = await bridge.start()
                mounts.append((str(sock.parent), SOCKET_DIR_INSIDE, False))
            name = f"hrl-{spec.rollout_id}-{uuid.uuid4().hex[:6]}"
            labels = {LABEL_RUN: self.run_id, LABEL_ROLLOUT: spec.rollout_id, LABEL_OWNER: self.owner}
            box_spec = ContainerSpec(
                image=image, name=name, labels=labels, workdir=inside_dir, mounts=mounts,
                network=("slirp4netns" if self.engine.name == "podman" else "bridge") if wants_net else "none",
                cpus=(task_env.cpus if task_env and task_env.cpus else ccfg.cpus),
                memory_mb=(task_env.memory_mb if task_env and task_env.memory_mb else ccfg.memory_mb),
                pids_limit=ccfg.pids_limit, user=ccfg.user, extra_args=tuple(ccfg.run_args))
            box = await (self.pool.take(box_spec) if self.pool is not None else Container.start(self.engine, box_spec))
            name = box.name  # a pooled container keeps the name it was started with
            box.clean, box.grade_image = ccfg.grading == "clean", grade_image
            common["box"] = box
            if spec.assets.workspace is not None:
                await box.put(workdir, inside_dir)
            env = self._env(spec)
            plain = {k: env.pop(k) for k in _PLAIN if k in env}  # the client keeps its own PATH and HOME
            relay = (str(gateway[1]), f"{SOCKET_DIR_INSIDE}/{sock.name}") if gateway else ("0", "")
            argv = self.engine.argv("exec", "--workdir", inside_dir, *(f"-e{k}={v}" for k, v in plain.items()),
                                    *env_names_args(sorted(env)), name,
                                    box.python, "-I", "-S", "-c", FORWARDER, *relay, "--", *spec.command)
            handle = f"container:{name}"
            watchdog = await self._watch_storage(box, task_env, cancel, over)
            try:
                out = await run_process(
                    argv, cwd=attempt_dir, timeout_s=spec.timeout_s, kill_grace_s=cfg.kill_grace_s,
                    env={**base_env(["PATH", "HOME", "TMPDIR", "LANG", "XDG_RUNTIME_DIR"], prepend_python_bin=False),
                         **env},
                    max_output_bytes=cfg.max_log_bytes, cancel=cancel,
                    on_start=lambda _pid: on_start(handle) if on_start is not None else None)
            finally:
                if watchdog is not None:
                    watchdog.cancel()
            if out.timed_out or out.cancelled:
                await box.stop_processes()
        except (ProcessStartError, EngineError, OSError) as exc:
            if box is not None:
                await box.remove()
            common.pop("box", None)
            return unfinished_result(spec, RolloutStatus.FAILED, FailureKind.INFRA,
                                     f"could not start the attempt's container: {exc}{_why(exc, image)}",
                                     started=started, **common)
        except BaseException:
            if box is not None:
                await asyncio.shield(box.remove())
            raise
        finally:
            if bridge is not None:
                await bridge.aclose()
        await asyncio.to_thread(_write_tails, attempt_dir, out.stdout, out.stderr)
        code = out.exit_code
        if over:
            status, kind = RolloutStatus.FAILED, FailureKind.AGENT
            reason = (f"the attempt wrote {over[0] >> 20} MB in its container, past its storage limit of "
                      f"{self._storage_mb(task_env)} MB; it was stopped")
        elif out.cancelled:
            status, kind, reason = RolloutStatus.CANCELLED, FailureKind.INFRA, "cancelled by the controller"
        elif out.timed_out:
            status, kind = RolloutStatus.TIMED_OUT, FailureKind.AGENT
            reason = f"harness ran past its timeout of {spec.timeout_s:g}s; its processes in the container were killed"
        elif code == 0:
            status, kind, reason = RolloutStatus.SUCCEEDED, None, None
        elif code in (125, 126, 127) and "harnessrl sandbox: could not start" in out.stderr:
            status, kind, reason = RolloutStatus.FAILED, FailureKind.INFRA, \
                f"the harness command could not start in the container: {out.stderr.strip()[-500:]}"
        else:
            status, kind, reason = RolloutStatus.FAILED, FailureKind.AGENT, f"harness {describe_exit(code)}"
        return AttemptResult(
            rollout_id=spec.rollout_id, status=status, failure_kind=kind, reason=reason, exit_code=code,
            timed_out=out.timed_out, stdout=out.stdout, stderr=out.stderr, stdout_bytes=out.stdout_bytes,
            stderr_bytes=out.stderr_bytes, duration_s=time.monotonic() - started, handle=handle, **common)

    def _storage_mb(self, task_env: TaskEnvironment | None) -> int | None:
        return (task_env.storage_mb if task_env is not None and task_env.storage_mb else None) \
            or self.config.container.storage_mb

    async def _watch_storage(self, box: Container, task_env: TaskEnvironment | None, cancel: asyncio.Event,
                             over: list[int]) -> asyncio.Task[None] | None:
        """Watch the container's writable layer against its storage limit (``environments/storage.py``)."""
        limit = self._storage_mb(task_env)
        if limit is None:
            return None
        done = await self.engine.run("inspect", "--format", "{{.GraphDriver.Data.UpperDir}}", box.name,
                                     check=False, timeout_s=60)
        upper = Path(done.text.strip())
        if done.returncode != 0 or not upper.is_absolute() or not upper.is_dir():
            logger.warning("storage limit of %s MB not enforced for %s: its writable layer is not readable here",
                           limit, box.name)
            return None

        def stop(written: int) -> None:
            over.append(written)
            cancel.set()
        return asyncio.create_task(storage.watch(upper, limit, stop))

    def _env(self, spec: AttemptSpec) -> dict[str, str]:
        """The harness's environment inside: the image's PATH (the venv's bin first when mounted), the
        config's extras, the task input and the rollout's identity with gateway URLs on 127.0.0.1."""
        cfg = self.config
        env: dict[str, str] = {"PATH": IMAGE_PATH, "HOME": "/root", "TMPDIR": "/tmp"}
        if cfg.container.harness == "mount" and cfg.prepend_python_bin:
            import sys
            env["PATH"] = f"{os.path.dirname(sys.executable)}:{IMAGE_PATH}"
        env.update(cfg.env)
        if cfg.task_input_env:
            env.update(task_input_env(spec.task_input, cfg.max_env_value_bytes))
        if cfg.task_input_file:
            env[TASK_INPUT_FILE_VAR] = INPUT_INSIDE
        env.update(spec.env)
        gateway = gateway_port(env)
        return loopback_env(env, *gateway) if gateway is not None else env

    async def aclose(self) -> None:
        await super().aclose()
        if self.pool is not None:
            await self.pool.aclose()

    async def release(self, result: AttemptResult) -> None:
        box = result.box
        keep = self.config.container.keep_containers
        if isinstance(box, Container) and not (keep == "all" or (keep == "failed" and
                                                                 result.status != RolloutStatus.SUCCEEDED)):
            await box.remove()
        await super().release(result)


__all__ = ["ContainerRunner", "host_python", "sweep"]
