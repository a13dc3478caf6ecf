"""Launching vLLM without vLLM: command lines, environment, health waiting and failure messages.

A stand-in "python" (a shell script) plays the server process, so the error paths a user meets (no venv,
a server that dies at start, one that never gets healthy) are exercised for real.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from vllm_fakes import start_fake_vllm

from harnessrl.config import HarnessConfig
from harnessrl.engines.config import EngineConfig
from harnessrl.engines.sglang import SglangNotSupported, check_sglang
from harnessrl.engines.vllm import (
    VllmEngine,
    VllmError,
    VllmServer,
    build_command,
    lora_rank,
    server_env,
    wait_healthy,
)


def _engine(**vllm: object) -> EngineConfig:
    return EngineConfig(kind="vllm", model="/models/smol", seed=3, vllm=vllm)


def test_command_line_has_model_port_lora_and_extras() -> None:
    cfg = _engine(python="/venv/bin/python", max_lora_rank=16, max_loras=2, extra_args=["--enforce-eager"],
                  tensor_parallel_size=2)
    cmd = build_command(cfg, "/models/smol", 8123, served_name="base", lora_rank_min=32)
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert flags["--model"] == "/models/smol" and flags["--port"] == "8123"
    assert flags["--served-model-name"] == "base" and flags["--seed"] == "3" and flags["--dtype"] == "float32"
    assert cmd[cmd.index("--max-lora-rank") + 1] == "32"  # raised to the trained adapter's rank
    assert cmd[cmd.index("--max-loras") + 1] == "2"
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert "--enable-lora" in cmd and cmd[-1] == "--enforce-eager"
    plain = build_command(_engine(enable_lora=False, python="p"), "m", 1, served_name="x")
    assert "--enable-lora" not in plain and "--tensor-parallel-size" not in plain


def test_max_model_len_from_context_window() -> None:
    cmd = build_command(EngineConfig(kind="vllm", context_window=2048), "m", 1, served_name="x")
    assert cmd[cmd.index("--max-model-len") + 1] == "2048"
    cmd = build_command(EngineConfig(kind="vllm", context_window=2048, vllm={"max_model_len": 512}), "m", 1,
                        served_name="x")
    assert cmd[cmd.index("--max-model-len") + 1] == "512"
    assert "--max-model-len" not in build_command(EngineConfig(kind="vllm"), "m", 1, served_name="x")


def test_lora_rank_rounds_up_to_what_vllm_accepts() -> None:
    assert [lora_rank(r) for r in (1, 4, 16, 17, 64)] == [1, 8, 16, 32, 64]
    with pytest.raises(VllmError, match="largest"):
        lora_rank(100_000)


def test_environment_enables_runtime_lora_and_drops_our_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", "/work/.venv")
    monkeypatch.delenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", raising=False)
    env = server_env(_engine(env={"VLLM_CPU_KVCACHE_SPACE": "1"}).vllm)
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "VIRTUAL_ENV" not in env
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in server_env(_engine(enable_lora=False).vllm)


def test_dev_routes_only_where_full_weights_are_loaded_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """VLLM_SERVER_DEV_MODE opens /collective_rpc: set only for full fine-tuning loaded in place."""
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    assert "VLLM_SERVER_DEV_MODE" not in server_env(_engine().vllm)
    assert server_env(_engine().vllm, in_place_updates=True)["VLLM_SERVER_DEV_MODE"] == "1"


def test_health_wait_times_out_with_a_clear_message() -> None:
    t0 = time.monotonic()
    with pytest.raises(VllmError, match=r"(?s)not healthy after 1 s.*startup_timeout_s.*LOG TAIL"):
        wait_healthy("http://127.0.0.1:9", 1.0, describe=lambda: "LOG TAIL", interval_s=0.1)
    assert time.monotonic() - t0 < 10


def test_health_wait_returns_once_healthy() -> None:
    server, _ = start_fake_vllm()
    try:
        assert wait_healthy(server.url.removesuffix("/v1"), 5.0) < 5.0
    finally:
        server.stop()


def _fake_python(tmp_path: Path, script: str) -> Path:
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_missing_venv_says_how_to_install(tmp_path: Path) -> None:
    server = VllmServer(_engine(python=str(tmp_path / "nope" / "python")), "m", tmp_path / "v.log",
                        served_name="base")
    with pytest.raises(VllmError, match="scripts/vllm.sh"):
        server.start()


def test_server_that_dies_reports_exit_code_and_log_tail(tmp_path: Path) -> None:
    exe = _fake_python(tmp_path, 'echo "ValueError: model architecture not supported: $4"\nexit 3\n')
    server = VllmServer(_engine(python=str(exe)), "/models/odd", tmp_path / "v.log", served_name="base")
    with pytest.raises(VllmError) as info:
        server.start()
    msg = str(info.value)
    assert "exited before it became healthy" in msg and "exit code 3" in msg
    assert "model architecture not supported: /models/odd" in msg  # the log's tail, with our --model
    assert server.proc is None


def test_server_that_never_gets_healthy_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    exe = _fake_python(tmp_path, f'echo $$ > {pid_file}\necho loading\nexec sleep 600\n')
    server = VllmServer(_engine(python=str(exe), startup_timeout_s=1.5), "m", tmp_path / "v.log",
                        served_name="base")
    with pytest.raises(VllmError, match=r"(?s)not healthy after 2 s.*still running.*loading"):
        server.start()
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the stand-in server was left running")


def test_attach_mode_uses_the_listed_urls() -> None:
    server, _ = start_fake_vllm()
    try:
        engine = VllmEngine(EngineConfig(kind="vllm", urls=[server.url + "/"]), log_dir=Path("/tmp"))
        assert not engine.launched and engine.served_name is None
        assert engine.start().urls == [server.url]
        with pytest.raises(VllmError, match="launched"):
            engine.restart("/models/new")
    finally:
        server.stop()
    with pytest.raises(VllmError, match="engine.urls is empty"):
        VllmEngine(EngineConfig(kind="vllm", vllm={"launch": False}), log_dir=Path("/tmp"))


def test_config_sections_parse_from_toml_shape() -> None:
    cfg = HarnessConfig.model_validate({"engine": {"kind": "vllm", "vllm": {"port": 8001, "max_lora_rank": 32}}})
    assert cfg.engine.vllm.port == 8001 and cfg.engine.vllm.launch is None
    with pytest.raises(ValueError):
        HarnessConfig.model_validate({"engine": {"vllm": {"no_such_key": 1}}})


def test_sglang_lists_what_is_missing() -> None:
    with pytest.raises(SglangNotSupported) as info:
        check_sglang(EngineConfig(kind="sglang"), "engine", train=True, probe=False)
    msg = str(info.value)
    assert "engine.urls" in msg and "load_lora_adapter" in msg and "render_mode" in msg
