"""Run one command in its own process group, with a timeout, bounded output capture and a clean kill.

Shared by the local runner (the harness) and the verifier. The guarantees: memory per process is
bounded whatever it prints (we keep a tail and count the rest); on timeout or cancel the *whole*
process group gets SIGTERM, then SIGKILL after a grace period, so children the command spawned die
too; leftovers of a command that exited on its own are reaped the same way; a daemon that escaped
the group (its own session) is found by the tag its environment inherited (``TAG_ENV``, Linux's ``/proc``)
and killed once the command has ended, so that outside a sandbox none lives on to wait for a verifier's
hidden files (one that scrubbed its environment escapes this; the sandbox's PID namespace holds even that:
docs/security.md); and such a daemon, while it holds our pipes, cannot make us wait for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

_READ_CHUNK = 65536
#: How long we keep reading pipes after the process group is gone (an escaped daemon may hold them).
_DRAIN_TIMEOUT_S = 2.0
#: Set in each command's environment to a value of its own: every process it starts inherits it, a daemon
#: that left the process group too, and that is how the end of the command finds them.
TAG_ENV = "HARNESSRL_PROCESS_TAG"


class ProcessStartError(Exception):
    """The command could not be started (missing executable, permissions, bad cwd, huge environment)."""


class TailBuffer:
    """Keeps the last ``limit`` bytes of a stream and counts all of them (memory stays under 2 × limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.limit <= 0:
            return
        self._buf += chunk
        if len(self._buf) > 2 * self.limit:  # trim rarely: amortised O(1) per byte
            del self._buf[: len(self._buf) - self.limit]

    @property
    def held_bytes(self) -> int:
        return len(self._buf)

    def text(self) -> str:
        data = bytes(self._buf[-self.limit :]) if self.limit > 0 else b""
        text = data.decode("utf-8", errors="replace")
        dropped = self.total - len(data)
        return f"[... {dropped} earlier bytes not kept ...]\n{text}" if dropped > 0 else text


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """``exit_code`` is the return code (negative: killed by that signal); ``None`` if it never ended."""

    pid: int
    exit_code: int | None
    timed_out: bool
    cancelled: bool
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a process group; False when it no longer exists (or is no longer ours to signal)."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        logger.warning("process group %d: not permitted to send %s", pgid, sig.name)
        return False


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _terminate_group(pgid: int, leader: asyncio.Task[int] | None, grace_s: float) -> None:
    """SIGTERM the group, give it ``grace_s`` to go (leader reaped and no member left), then SIGKILL."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    if leader is not None and not leader.done():
        await asyncio.wait({leader}, timeout=grace_s)
    while _group_exists(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)
    if leader is not None and not leader.done():
        await asyncio.wait({leader}, timeout=10.0)  # SIGKILL is final; bounded in case of D-state


def _tagged(tag: str) -> list[int]:
    """PIDs of this user's processes whose environment holds ``TAG_ENV=tag`` (none where there is no /proc)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and _carries(int(entry.name), tag):
                found.append(int(entry.name))
    return found


def _carries(pid: int, tag: str) -> bool:
    """Whether process ``pid`` is this user's and its environment holds ``TAG_ENV=tag``."""
    try:
        return (os.stat(f"/proc/{pid}").st_uid == os.getuid()
                and f"{TAG_ENV}={tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
    except OSError:  # gone meanwhile, or not ours to read
        return False


def _kill_escaped(tag: str, pgid: int) -> None:
    """SIGKILL the processes that still carry the command's tag once its group is gone (daemons, setsid).

    Through a pidfd opened before the tag is checked again: a process that exited after the scan and whose
    PID went to another process is not the one the pidfd holds, and that one does not carry the tag."""
    pids = []
    for pid in _tagged(tag):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # gone meanwhile
            continue
        except OSError:  # no pidfds (Linux < 5.3): a plain kill, with the small race that has
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                pids.append(pid)
            continue
        try:
            if _carries(pid, tag):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    pids.append(pid)
        finally:
            os.close(pidfd)
    if pids:
        logger.info("pid %d: killed %d process(es) it started outside its process group: %s", pgid, len(pids),
                    pids)


async def _wait_exit(proc: asyncio.subprocess.Process) -> int:
    """The leader's exit status as soon as it is reaped.

    Not ``proc.wait()``: on Python 3.11 that also waits for the pipes to close, which a child that
    inherited stdout can delay for ever. ``returncode`` is set the moment the child watcher reaps it.
    """
    delay = 0.002
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return proc.returncode


async def _drain(stream: asyncio.StreamReader | None, sink: TailBuffer) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    kill_grace_s: float,
    max_output_bytes: int,
    cancel: asyncio.Event | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ProcessOutcome:
    """Run ``argv`` to completion, timeout or cancel; never leaves a member of its group running.

    Raises ``ProcessStartError`` if it cannot start (or ``on_start`` raised: the process is killed).
    If the calling task is cancelled, the group is SIGKILLed before ``CancelledError`` propagates.
    """
    if not argv:
        raise ProcessStartError("empty command: configure the harness command, e.g. ['python', 'agent.py']")
    started = time.monotonic()
    tag = uuid.uuid4().hex
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env={**env, TAG_ENV: tag},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # own session => own process group, pgid == pid
        )
    except (OSError, ValueError) as exc:
        raise ProcessStartError(f"could not start {argv[0]!r} in {cwd}: {exc}") from exc
    pgid = proc.pid
    out, err = TailBuffer(max_output_bytes), TailBuffer(max_output_bytes)
    readers = [asyncio.create_task(_drain(proc.stdout, out)), asyncio.create_task(_drain(proc.stderr, err))]
    leader = asyncio.create_task(_wait_exit(proc))
    cancel_wait = asyncio.create_task(cancel.wait()) if cancel is not None else None
    timed_out = cancelled = False
    try:
        if on_start is not None:
            try:
                on_start(proc.pid)
            except Exception as exc:
                await _terminate_group(pgid, leader, 0.0)
                raise ProcessStartError(f"on_start callback failed, process killed: {exc!r}") from exc
        waiting = {leader} if cancel_wait is None else {leader, cancel_wait}
        await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if not leader.done():
            cancelled = cancel_wait is not None and cancel_wait.done()
            timed_out = not cancelled
            logger.info(
                "pid %d %s; killing its process group", pgid, "cancelled" if cancelled else "timed out"
            )
            await _terminate_group(pgid, leader, kill_grace_s)
        elif _group_exists(pgid):  # exited, but left children behind in its group
            logger.info("pid %d exited leaving processes in its group; terminating them", pgid)
            await _terminate_group(pgid, None, kill_grace_s)
        _kill_escaped(tag, pgid)
        _, pending = await asyncio.wait(readers, timeout=_DRAIN_TIMEOUT_S)
        if pending:
            logger.warning("pid %d: a process outside its group still holds its output pipes", pgid)
    except BaseException:
        _signal_group(pgid, signal.SIGKILL)  # cancelled ourselves: no grace, but nothing survives
        _kill_escaped(tag, pgid)
        # let the kill land and the pipes close, so the transport is finished before the loop goes
        await asyncio.wait({leader, *readers}, timeout=_DRAIN_TIMEOUT_S)
        raise
    finally:
        for task in (*readers, cancel_wait):
            if task is not None and not task.done():
                task.cancel()
        if not leader.done():
            leader.cancel()
    return ProcessOutcome(
        pid=proc.pid,
        exit_code=proc.returncode,
        timed_out=timed_out,
        cancelled=cancelled,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration_s=time.monotonic() - started,
    )


def describe_exit(code: int | None) -> str:
    """'exited with code 3' / 'killed by signal SIGSEGV' for reasons a user reads."""
    if code is None:
        return "did not exit"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exited with code {code}"
