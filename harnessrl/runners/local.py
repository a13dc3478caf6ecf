"""The local runner: one subprocess per attempt, in its own directory and process group.

With ``[runner] sandbox`` resolving to bubblewrap (the default where ``bwrap`` is installed) each attempt
runs in its own namespaces and sees only what ``harnessrl.runners.sandbox`` allows: its workspace, the
system and the venv read-only, the gateway and nothing else of the network. Without it the harness runs
as the same user as harnessrl and can read anything that user can: the runner then only contains
accidents (crash, hang, output floods, leftover children, an edited test file). See docs/security.md.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harnessrl.runners.base import OnStart, Runner, RunnerError
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.env import TASK_INPUT_FILE_VAR, base_env, task_input_env
from harnessrl.runners.preflight import CommandNotFound, check_command
from harnessrl.runners.process import ProcessStartError, describe_exit, run_process
from harnessrl.runners.sandbox import (
    GatewayBridge,
    Sandbox,
    gateway_port,
    python_paths,
    resolve_bwrap,
    sandbox_env,
)
from harnessrl.runners.spec import AttemptResult, AttemptSpec, unfinished_result
from harnessrl.runners.workspace import WorkspaceError, checksum_globs, prepare_attempt_dir
from harnessrl.types import FailureKind, RolloutStatus

logger = logging.getLogger(__name__)


class LocalRunner(Runner):
    """Runs attempts as child processes of this process. ``workdir_root`` defaults to the config's."""

    def __init__(
        self, config: RunnerConfig, workdir_root: Path | str | None = None, *, hide: Sequence[Path | str] = ()
    ) -> None:
        """``hide``: paths no attempt may see even inside a readable folder (run directory, store, task
        files, hidden tests); the attempts root is always hidden. Raises ``SandboxUnavailable`` when
        ``sandbox = "bubblewrap"`` cannot work here."""
        self.config = config
        self.workdir_root = Path(workdir_root if workdir_root is not None else config.workdir_root).resolve()
        bwrap = resolve_bwrap(config.sandbox)
        self.sandbox: Sandbox | None = None
        if bwrap is not None:
            self.sandbox = Sandbox(
                bwrap=bwrap,
                read_only=(*python_paths(), *(Path(p) for p in config.sandbox_read_only)),
                hide=(self.workdir_root, *(Path(p) for p in hide)),
            )
            logger.info("attempts and verifiers run in a bubblewrap sandbox (%s): workspace read-write, "
                        "system read-only, network: the gateway only", bwrap)
        self._slots = asyncio.Semaphore(config.concurrency)
        self._cancels: dict[str, asyncio.Event] = {}

    def active(self) -> list[str]:
        return list(self._cancels)

    async def cancel(self, rollout_id: str) -> bool:
        event = self._cancels.get(rollout_id)
        if event is None:
            return False
        event.set()
        return True

    async def run(self, spec: AttemptSpec, on_start: OnStart | None = None) -> AttemptResult:
        if spec.rollout_id in self._cancels:
            raise RunnerError(f"rollout {spec.rollout_id} is already running on this runner")
        cancel = self._cancels[spec.rollout_id] = asyncio.Event()
        try:
            if not await self._acquire_slot(cancel):
                return unfinished_result(spec, RolloutStatus.CANCELLED, FailureKind.INFRA, "cancelled before start")
            try:
                return await self._run_started(spec, cancel, on_start)
            finally:
                self._slots.release()
        finally:
            del self._cancels[spec.rollout_id]

    async def _acquire_slot(self, cancel: asyncio.Event) -> bool:
        """Wait for a concurrency slot, or for a cancel (a queued attempt is cancelled at once)."""
        slot = asyncio.ensure_future(self._slots.acquire())
        cancelled = asyncio.ensure_future(cancel.wait())
        try:
            await asyncio.wait({slot, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # our own task was cancelled while queued: give the slot back if we got it
            cancel.set()
            raise
        finally:
            cancelled.cancel()
            if not slot.done():
                slot.cancel()
                await asyncio.wait({slot})
            if not slot.cancelled() and slot.exception() is None and cancel.is_set():
                self._slots.release()
        return not cancel.is_set()

    async def _run_started(
        self, spec: AttemptSpec, cancel: asyncio.Event, on_start: OnStart | None
    ) -> AttemptResult:
        cfg = self.config
        started = time.monotonic()
        try:
            attempt_dir, workdir, input_file = await asyncio.to_thread(
                prepare_attempt_dir,
                self.workdir_root,
                spec.rollout_id,
                spec.assets.workspace,
                spec.task_input,
            )
            protected = await asyncio.to_thread(checksum_globs, workdir, spec.protected)
        except WorkspaceError as exc:
            return unfinished_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, str(exc), started=started)

        env = base_env(cfg.inherit_env, prepend_python_bin=cfg.prepend_python_bin)
        env.update(cfg.env)
        if cfg.task_input_env:
            env.update(task_input_env(spec.task_input, cfg.max_env_value_bytes))
        if cfg.task_input_file:
            env[TASK_INPUT_FILE_VAR] = str(input_file)
        env.update(spec.env)  # the rollout's identity wins over everything

        handle: str | None = None

        def started_cb(pid: int) -> None:
            nonlocal handle
            handle = f"local:{pid}"
            if on_start is not None:
                on_start(handle)

        common: dict[str, Any] = {"attempt_dir": attempt_dir, "workdir": workdir, "protected_sha256": protected,
                  "sandbox": self.sandbox}
        bridge: GatewayBridge | None = None
        try:
            argv: Sequence[str] = spec.command
            if self.sandbox is not None:
                argv, env, bridge = await self._sandboxed(spec, workdir, input_file, env)
            out = await run_process(
                argv,
                cwd=workdir,
                env=env,
                timeout_s=spec.timeout_s,
                kill_grace_s=cfg.kill_grace_s,
                max_output_bytes=cfg.max_log_bytes,
                cancel=cancel,
                on_start=started_cb,
            )
        except ProcessStartError as exc:
            return unfinished_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, str(exc), started=started, **common)
        except Exception as exc:  # a bug of ours must not end the training run
            logger.exception("runner error on rollout %s", spec.rollout_id)
            return unfinished_result(
                spec,
                RolloutStatus.FAILED,
                FailureKind.INFRA,
                f"runner error: {exc!r}",
                started=started,
                **common,
            )
        finally:
            if bridge is not None:
                await bridge.aclose()

        exit_code = out.exit_code if self.sandbox is None else Sandbox.exit_code(out.exit_code)
        await asyncio.to_thread(_write_tails, attempt_dir, out.stdout, out.stderr)
        if out.cancelled:
            status, kind, reason = RolloutStatus.CANCELLED, FailureKind.INFRA, "cancelled by the controller"
        elif out.timed_out:
            status, kind = RolloutStatus.TIMED_OUT, FailureKind.AGENT
            reason = f"harness ran past its timeout of {spec.timeout_s:g}s; its process group was killed"
        elif exit_code == 0:
            status, kind, reason = RolloutStatus.SUCCEEDED, None, None
        else:
            status, kind, reason = (
                RolloutStatus.FAILED,
                FailureKind.AGENT,
                f"harness {describe_exit(exit_code)}",
            )
        logger.debug(
            "rollout %s: %s in %.2fs (%s)",
            spec.rollout_id,
            status,
            out.duration_s,
            describe_exit(exit_code),
        )
        return AttemptResult(
            rollout_id=spec.rollout_id,
            status=status,
            failure_kind=kind,
            reason=reason,
            exit_code=exit_code,
            timed_out=out.timed_out,
            stdout=out.stdout,
            stderr=out.stderr,
            stdout_bytes=out.stdout_bytes,
            stderr_bytes=out.stderr_bytes,
            duration_s=time.monotonic() - started,
            handle=handle,
            **common,
        )

    async def _sandboxed(
        self, spec: AttemptSpec, workdir: Path, input_file: Path, env: dict[str, str]
    ) -> tuple[list[str], dict[str, str], GatewayBridge | None]:
        """The bwrap command line, the environment inside, and the relay to the gateway (started)."""
        assert self.sandbox is not None
        try:  # inside the sandbox a missing program is exit 127: say it here, as an infra failure
            program = spec.command[0]
            if "/" in program and not program.startswith("/"):
                program = str(workdir / program)
            check_command([program], env, "the harness command")
        except CommandNotFound as exc:
            raise ProcessStartError(f"could not start {spec.command[0]!r} in {workdir}: {exc}") from None
        bridge, relay = None, None
        gateway = gateway_port(spec.env)
        try:
            if gateway is not None:
                bridge = GatewayBridge(*gateway)
                relay = (gateway[1], await bridge.start())
            hidden = [spec.assets.hidden_dir] if spec.assets.hidden_dir is not None else []
            argv = self.sandbox.argv(spec.command, workdir=workdir, read_only=[input_file], hide=hidden,
                                     home=env.get("HOME"), relay=relay)
        except BaseException:
            if bridge is not None:
                await bridge.aclose()
            raise
        return argv, sandbox_env(env), bridge

    async def release(self, result: AttemptResult) -> None:
        keep = self.config.keep_workdirs
        if result.attempt_dir is None or keep == "all":
            return
        if keep == "failed" and result.status != RolloutStatus.SUCCEEDED:
            return
        await asyncio.to_thread(shutil.rmtree, result.attempt_dir, True)


def _write_tails(attempt_dir: Path, stdout: str, stderr: str) -> None:
    """Best effort, for people debugging: the harness may have deleted its own attempt directory."""
    try:
        (attempt_dir / "stdout.txt").write_text(stdout, errors="replace")
        (attempt_dir / "stderr.txt").write_text(stderr, errors="replace")
    except OSError as exc:
        logger.warning("could not write output tails to %s: %s", attempt_dir, exc)


