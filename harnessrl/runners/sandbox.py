"""Bubblewrap sandbox for local attempts and verifiers (``[runner] sandbox``).

What a sandboxed command sees (an allow-list; everything else does not exist for it):

* the system read-only: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc`` (``/etc/shadow`` emptied);
* read-only: the running Python's environment (the venv), harnessrl's own package, the folders of the
  command's absolute file arguments, and ``[runner] sandbox_read_only``;
* read-write: its own workspace only (same path as outside, so paths in logs and configs stay true);
* a private ``/tmp``, ``$HOME``, ``/proc`` and ``/dev``; no capabilities; its own PID, IPC, UTS and network
  namespaces, so no process it starts outlives it and no port of this machine is reachable;
* ``hide``: paths masked even when a read-only folder above holds them (the run directory with the store,
  the attempts root, task files with reference answers, hidden tests).

The gateway stays reachable: inside, a small stdlib forwarder listens on ``127.0.0.1:<gateway port>`` and
relays each connection over a unix socket bound into the sandbox to ``GatewayBridge`` outside, which opens
the TCP connection to the gateway. So ``OPENAI_BASE_URL`` keeps working unchanged, and that one port is the
only way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MASKED_FILES = ("/etc/shadow", "/etc/gshadow")
#: Where the gateway's unix socket appears inside the sandbox.
SOCKET_INSIDE = "/run/harnessrl/gateway.sock"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class SandboxUnavailable(RuntimeError):
    """``sandbox = "bubblewrap"`` was asked for but bwrap is missing or cannot create namespaces here."""


#: Runs inside the sandbox as the harness's parent: relays 127.0.0.1:<port> to the gateway socket, runs
#: the command, exits as it did. Stdlib only (run with -I -S), threads: one pair per connection.
FORWARDER = r"""
import os, signal, socket, subprocess, sys, threading
port, path, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
def relay(conn):
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(path)
    except OSError:
        conn.close(); up.close(); return
    t = threading.Thread(target=pipe, args=(up, conn), daemon=True); t.start()
    pipe(conn, up); t.join(); conn.close(); up.close()
def serve(srv):
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=relay, args=(conn,), daemon=True).start()
srv = None
if port:  # listening before the command starts; accepted once the thread runs (the backlog holds them)
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", port)); srv.listen(256)
    except OSError as exc:
        print(f"harnessrl sandbox: no gateway relay on 127.0.0.1:{port}: {exc}", file=sys.stderr)
        srv = None
SIGS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
for sig in SIGS:  # the whole group gets them: the command decides, we wait for it
    signal.signal(sig, signal.SIG_IGN)
def default_signals():
    for sig in SIGS:
        signal.signal(sig, signal.SIG_DFL)
try:  # before any thread: preexec_fn is only safe in a single-threaded process
    child = subprocess.Popen(cmd, preexec_fn=default_signals)
except OSError as exc:
    print(f"harnessrl sandbox: could not start {cmd[0]!r}: {exc}", file=sys.stderr); sys.exit(127)
if srv is not None:
    threading.Thread(target=serve, args=(srv,), daemon=True).start()
code = child.wait()
sys.exit(code if code >= 0 else 128 - code)
"""


@functools.cache
def _bwrap_works(bwrap: str) -> str | None:
    """None when bwrap can build a sandbox here; else why not (e.g. user namespaces disabled)."""
    try:
        out = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
             "--dev", "/dev", "--cap-drop", "ALL", "true"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if out.returncode == 0 else (out.stderr.strip() or f"exit code {out.returncode}")


def resolve_bwrap(mode: str) -> str | None:
    """The bwrap executable to use for ``mode`` (auto/bubblewrap/none), None for no sandbox."""
    if mode == "none":
        return None
    bwrap = shutil.which("bwrap")
    problem = "bwrap is not installed" if bwrap is None else _bwrap_works(bwrap)
    if problem is None:
        return bwrap
    if mode == "bubblewrap":
        raise SandboxUnavailable(
            f'[runner] sandbox = "bubblewrap" but {problem}: install it (apt-get install bubblewrap) on a '
            'machine that allows user namespaces, or set sandbox = "none" (attempts then run unisolated)'
        )
    logger.warning(
        "attempts run WITHOUT a sandbox (%s): a harness can read and write whatever this user can and "
        "reach any port; apt-get install bubblewrap, or set [runner] sandbox = \"none\" to silence this",
        problem,
    )
    return None


def gateway_port(env: Mapping[str, str]) -> tuple[str, int] | None:
    """(host, port) of the gateway the rollout's environment points at, from ``OPENAI_BASE_URL``."""
    url = env.get("OPENAI_BASE_URL")
    if not url:
        return None
    parts = urlsplit(url)
    if parts.hostname is None:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def loopback_env(env: Mapping[str, str], host: str, port: int) -> dict[str, str]:
    """The environment with gateway URLs on another host rewritten to 127.0.0.1 (where the relay listens)."""
    if host in _LOOPBACK:
        return dict(env)
    out = {}
    for name, value in env.items():
        for scheme in ("http", "https"):
            prefix = f"{scheme}://{host}:{port}"
            if value.startswith(prefix):
                value = f"http://127.0.0.1:{port}" + value[len(prefix):]
        out[name] = value
    return out


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def command_dirs(command: Sequence[str]) -> list[Path]:
    """Folders of the command's absolute file arguments (the harness script and what lies beside it)."""
    found: list[Path] = []
    for arg in command:
        if not os.path.isabs(arg) or not os.path.exists(arg):
            continue
        real = _real(arg)
        folder = real if real.is_dir() else real.parent
        if folder != Path("/") and folder not in found:
            found.append(folder)
    return found


def python_paths() -> list[Path]:
    """What the running Python needs to start in the sandbox: its environment and harnessrl's package."""
    import harnessrl

    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(_real(sys.executable)),
             os.path.dirname(harnessrl.__file__)]
    out: list[Path] = []
    for p in paths:
        real = _real(p)
        if real.exists() and real not in out:
            out.append(real)
    return out


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A bubblewrap policy shared by a runner's attempts and their verifiers."""

    bwrap: str
    read_only: tuple[Path, ...] = ()
    hide: tuple[Path, ...] = ()
    extra_args: tuple[str, ...] = field(default=())

    def argv(
        self,
        command: Sequence[str],
        *,
        workdir: Path,
        read_only: Sequence[Path] = (),
        hide: Sequence[Path] = (),
        home: str | None = None,
        relay: tuple[int, Path] | None = None,
    ) -> list[str]:
        """The bwrap command line running ``command`` in ``workdir`` (read-write).

        ``read_only``: more paths bound read-only at their own path, after the hiding (files the attempt
        must see inside a hidden folder, e.g. its task input). ``relay``: (gateway port, socket outside).
        """
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--as-pid-1", "--cap-drop", "ALL"]
        for p in SYSTEM_PATHS:
            if os.path.islink(p):
                args += ["--symlink", os.readlink(p), p]
            elif os.path.isdir(p):
                args += ["--ro-bind", p, p]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
        for f in MASKED_FILES:
            if os.path.isfile(f):
                args += ["--ro-bind", "/dev/null", f]
        if home and home != "/":  # before the read-only folders: a venv may live under $HOME
            args += ["--tmpfs", home]
        bound = [Path(p) for p in SYSTEM_PATHS]
        for path in (*self.read_only, *command_dirs(command)):
            real = _real(path)
            if real.exists() and not _under(real, bound):
                args += ["--ro-bind", str(real), str(real)]
                bound.append(real)
        for path in (*self.hide, *hide):  # after every read-only folder that could hold them
            real = _real(path)
            if not real.exists() or not _under(real, bound):
                continue
            args += ["--tmpfs", str(real)] if real.is_dir() else ["--ro-bind", "/dev/null", str(real)]
        for path in read_only:
            real = _real(path)
            if real.exists():
                args += ["--ro-bind", str(real), str(real)]
        wd = _real(workdir)
        args += ["--bind", str(wd), str(wd), "--chdir", str(wd)]
        if relay is not None:
            args += ["--bind", str(relay[1]), SOCKET_INSIDE]
        if relay is not None and relay[0] < 1024:  # only binds a low port in the sandbox's own netns
            args += ["--cap-add", "CAP_NET_BIND_SERVICE"]
        args += [*self.extra_args, "--"]
        port = relay[0] if relay is not None else 0
        return [*args, sys.executable, "-I", "-S", "-c", FORWARDER, str(port), SOCKET_INSIDE, "--", *command]

    @staticmethod
    def exit_code(code: int | None) -> int | None:
        """bwrap reports a child killed by signal N as 128+N: give it back as -N, like an unsandboxed run."""
        if code is not None and 128 < code <= 128 + 64:
            return 128 - code
        return code


def sandbox_env(env: Mapping[str, str]) -> dict[str, str]:
    """What changes in the environment inside: a private temp dir, and gateway URLs on loopback."""
    out = dict(env)
    out["TMPDIR"] = "/tmp"
    gw = gateway_port(out)
    if gw is not None:
        out = loopback_env(out, *gw)
    return out


#: Bridge folders: ``<tmp>/hrl-gw-<random>/gw.sock``.
BRIDGE_PREFIX, BRIDGE_SOCKET = "hrl-gw-", "gw.sock"
#: A bridge folder left by a controller that was killed (SIGKILL: no ``aclose``) is removed by the next
#: process to start a bridge, once it is this old and no process has its socket bound.
STALE_BRIDGE_S = 600.0


def sweep_stale_bridges(root: str | Path | None = None, min_age_s: float = STALE_BRIDGE_S) -> list[Path]:
    """Remove the bridge folders of controllers that died without closing them: this user's, older than
    ``min_age_s`` (a young one may be another controller's, its socket not bound yet) and with a socket no
    process has bound (``/proc/net/unix``; without it, nothing is removed). Returns what was removed."""
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return []
    bound = {fields[7] for line in lines if len(fields := line.split()) >= 8}
    removed, now = [], time.time()
    for folder in Path(root or tempfile.gettempdir()).glob(BRIDGE_PREFIX + "*"):
        try:
            st = folder.lstat()
        except OSError:
            continue
        if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < min_age_s
                or str(folder / BRIDGE_SOCKET) in bound):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


@functools.cache
def _sweep_once() -> None:
    if removed := sweep_stale_bridges():
        logger.info("removed %d sandbox relay folders left by killed controllers", len(removed))


class GatewayBridge:
    """The outside end of the relay: a unix socket whose every connection is piped to the gateway's TCP port.

    One per attempt, in a private temporary folder (unix socket paths must stay under 108 bytes); the first
    bridge a process starts removes those that killed controllers left (``sweep_stale_bridges``).
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._dir: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Path:
        _sweep_once()
        self._dir = tempfile.mkdtemp(prefix=BRIDGE_PREFIX)
        path = Path(self._dir) / BRIDGE_SOCKET
        self._server = await asyncio.start_unix_server(self._accept, path=str(path))
        return path

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
            except OSError as exc:
                logger.warning("sandbox relay: gateway %s:%d unreachable: %s", self.host, self.port, exc)
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except asyncio.CancelledError:
            pass  # aclose() ends open connections; the server's callback must not log that as an error
        finally:
            writer.close()
            self._tasks.discard(task)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
