"""vLLM engines: launch vLLM's OpenAI server in its own virtual environment, or attach to running ones.

vLLM already speaks the gateway's engine dialect (``return_token_ids``, logprobs, token-id prompts on
``/v1/completions``), so an engine here is only a process to start, watch and stop, plus the URLs the
gateway's pool spreads rollouts over. vLLM lives in its own venv (``scripts/vllm.sh``) because it pins its
own torch/transformers stack; we start it as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm``
console command fails on the CPU build). Weight publishing is in :mod:`harnessrl.engines.vllm_publish`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.vllm_config import VllmConfig

log = logging.getLogger(__name__)

#: LoRA ranks vLLM accepts for --max-lora-rank.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class VllmError(RuntimeError):
    """vLLM could not be started, reached or told to load weights; the message says what to do."""


def vllm_python(config: VllmConfig) -> Path:
    """The Python executable of the vLLM venv (``HARNESSRL_VLLM_PYTHON`` wins over the config)."""
    return Path(os.environ.get("HARNESSRL_VLLM_PYTHON") or config.python).expanduser()


def lora_rank(wanted: int) -> int:
    """The smallest rank vLLM accepts that is at least ``wanted``."""
    for r in LORA_RANKS:
        if r >= wanted:
            return r
    raise VllmError(f"LoRA rank {wanted} is above vLLM's largest --max-lora-rank ({LORA_RANKS[-1]})")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def build_command(engine: EngineConfig, model_path: str | Path, port: int, *, served_name: str,
                  lora_rank_min: int = 0) -> list[str]:
    """The command line that starts one vLLM OpenAI server for ``model_path`` on ``port``."""
    cfg = engine.vllm
    cmd = [str(vllm_python(cfg)), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_path),
           "--served-model-name", served_name, "--host", cfg.host, "--port", str(port),
           "--dtype", engine.dtype, "--seed", str(engine.seed)]
    if cfg.tensor_parallel_size > 1:
        cmd += ["--tensor-parallel-size", str(cfg.tensor_parallel_size)]
    max_len = cfg.max_model_len or engine.context_window
    if max_len:
        cmd += ["--max-model-len", str(max_len)]
    if cfg.enable_lora:
        cmd += ["--enable-lora", "--max-lora-rank", str(lora_rank(max(cfg.max_lora_rank, lora_rank_min))),
                "--max-loras", str(cfg.max_loras)]
    return cmd + list(cfg.extra_args)


def server_env(cfg: VllmConfig, *, in_place_updates: bool = False) -> dict[str, str]:
    """Environment of a launched server: ours, plus what runtime LoRA loading, in-place full-weight updates
    (vLLM's dev routes: ``/collective_rpc``, ``/reset_prefix_cache``) and offline use need."""
    env = dict(os.environ)
    # The harnessrl venv's variables must not leak into vLLM's interpreter.
    for k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    if cfg.enable_lora:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    if in_place_updates:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    env.update(cfg.env)
    return env


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def wait_healthy(root_url: str, timeout_s: float, *, alive: Callable[[], bool] | None = None,
                 describe: Callable[[], str] = lambda: "", interval_s: float = 1.0) -> float:
    """Poll ``GET {root_url}/health`` until 200; return the seconds waited.

    Raises ``VllmError`` (with ``describe()``, e.g. the server log's tail) when ``alive()`` turns false or
    the timeout passes.
    """
    t0 = time.monotonic()
    last = "no answer yet"
    with httpx.Client(timeout=5.0) as client:
        while True:
            if alive is not None and not alive():
                raise VllmError(f"the vLLM server at {root_url} exited before it became healthy.\n{describe()}")
            try:
                r = client.get(f"{root_url}/health")
                if r.status_code == 200:
                    return time.monotonic() - t0
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() - t0 > timeout_s:
                raise VllmError(
                    f"the vLLM server at {root_url} was not healthy after {timeout_s:.0f} s (last: {last}); "
                    f"raise engine.vllm.startup_timeout_s or check the log.\n{describe()}")
            time.sleep(interval_s)


class VllmServer:
    """One launched vLLM OpenAI server process (its own process group, log file, port)."""

    def __init__(self, engine: EngineConfig, model_path: str | Path, log_path: Path, *, served_name: str,
                 lora_rank_min: int = 0, in_place_updates: bool = False) -> None:
        self.engine = engine
        self.in_place_updates = in_place_updates
        self.model_path = str(model_path)
        self.log_path = log_path
        self.served_name = served_name
        self.lora_rank_min = lora_rank_min
        self.port = engine.vllm.port or free_port(engine.vllm.host)
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.engine.vllm.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def command(self) -> list[str]:
        return build_command(self.engine, self.model_path, self.port, served_name=self.served_name,
                             lora_rank_min=self.lora_rank_min)

    def start(self) -> VllmServer:
        cmd = self.command()
        if not Path(cmd[0]).exists():
            raise VllmError(f"no vLLM Python at {cmd[0]}: run `bash scripts/vllm.sh` (creates .venv-vllm) or "
                            "set engine.vllm.python / HARNESSRL_VLLM_PYTHON to a venv that has vLLM")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting vLLM on port %d for %s (log: %s)", self.port, self.model_path, self.log_path)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=server_env(self.engine.vllm, in_place_updates=self.in_place_updates),
                                         start_new_session=True)
        atexit.register(self.stop)  # its own session: it would outlive us otherwise
        try:
            self.startup_s = wait_healthy(self.root_url, self.engine.vllm.startup_timeout_s,
                                          alive=lambda: self.proc is not None and self.proc.poll() is None,
                                          describe=self._describe)
        except BaseException:
            self.stop()
            raise
        log.info("vLLM ready at %s after %.0f s", self.base_url, self.startup_s)
        return self

    def _describe(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        status = f"exit code {code}" if code is not None else "still running"
        return f"vLLM process: {status}; last lines of {self.log_path}:\n{log_tail(self.log_path)}"

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group (vLLM forks engine workers), SIGKILL after ``timeout_s``."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


class VllmEngine:
    """The vLLM engines of a run: launched servers (one per ``launch``) or attached URLs.

    ``urls`` are what the gateway forwards to; ``served_name`` is the base model's name on launched
    servers (None when attached: the gateway asks ``/v1/models``). ``restart(folder)`` serves a new full
    model from a saved folder (full-weight publishing) on the same ports; ``in_place_updates`` starts the
    launched servers with the routes that load new full weights without a restart (``VllmInPlacePublisher``).
    """

    def __init__(self, config: EngineConfig, *, log_dir: Path, lora_rank_min: int = 0,
                 in_place_updates: bool = False) -> None:
        self.config = config
        self.in_place_updates = in_place_updates
        self.log_dir = Path(log_dir)
        self.lora_rank_min = lora_rank_min
        self.launched = config.vllm.launch if config.vllm.launch is not None else not config.urls
        self.servers: list[VllmServer] = []
        self.served_name: str | None = (config.served_model_name or "base") if self.launched else None
        self._attached = [u.rstrip("/") for u in config.urls]
        if not self.launched and not self._attached:
            raise VllmError("engine.vllm.launch = false but engine.urls is empty: list the running servers' "
                            "base URLs (http://host:port/v1) or let harnessrl launch one")

    @property
    def urls(self) -> list[str]:
        return [s.base_url for s in self.servers] if self.launched else list(self._attached)

    def model_path(self) -> str:
        from harnessrl.models import prepare_model

        return str(prepare_model(self.config.model))

    def start(self) -> VllmEngine:
        if self.launched and not self.servers:
            self._launch(self.model_path())
        else:
            for url in self.urls:
                wait_healthy(url.removesuffix("/v1"), 30.0)
        return self

    def _launch(self, model_path: str) -> None:
        assert self.served_name is not None
        n = len(self.servers)
        server = VllmServer(self.config, model_path, self.log_dir / f"vllm-{n}.log",
                            served_name=self.served_name, lora_rank_min=self.lora_rank_min,
                            in_place_updates=self.in_place_updates)
        self.servers.append(server)
        try:
            server.start()
        except BaseException:
            self.servers.remove(server)
            raise

    def restart(self, model_path: str | Path) -> float:
        """Serve the full model at ``model_path`` on every launched server (same ports); returns seconds."""
        if not self.launched:
            raise VllmError("full-weight publishing restarts the vLLM servers harnessrl launched; attached "
                            "servers (engine.urls) cannot be restarted from here: use LoRA (training.lora)")
        t0 = time.monotonic()
        for server in self.servers:
            server.stop()
            server.model_path = str(model_path)
            server.start()
        return time.monotonic() - t0

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers.clear()

    def __enter__(self) -> VllmEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
