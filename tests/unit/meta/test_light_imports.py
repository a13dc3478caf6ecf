"""Loading a config, exporting, and serving the gateway in front of URL engines never import torch.

Each check runs in a fresh interpreter and reads its ``sys.modules``: torch costs seconds and hundreds of
MB, and only the trainer and the embedded engine need it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.fake_engine import EngineServer
from run_config import write_run_config

HEAVY = ("torch", "transformers", "peft")

REPORT = f"import sys; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"


def _heavy_after(code: str, timeout_s: float = 120) -> list[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\n{REPORT}"], capture_output=True, text=True,
                         timeout=timeout_s, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return eval(out.stdout.strip().splitlines()[-1])  # noqa: S307  (our own print of a list of names)


@pytest.mark.parametrize("module", ["harnessrl.config", "harnessrl.export", "harnessrl.cli", "harnessrl.inspection.terminal",
                                    "harnessrl.weights.checkpoints", "harnessrl.rewards.outcome"])
def test_importing_does_not_load_torch(module: str) -> None:
    assert _heavy_after(f"import {module}") == []


def test_loading_a_config_does_not_load_torch(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, {"run": {"steps": 2}, "training": {"lr": 1e-5, "lora": {"r": 8}}})
    assert _heavy_after(f"from harnessrl.config import load_config; load_config({str(cfg)!r})") == []


GATEWAY = """
import os, sys, threading, time, traceback
import httpx
from harnessrl.cli import main

def watch():
    try:
        base = "http://127.0.0.1:%(port)d"
        with httpx.Client(base_url=base, follow_redirects=True) as client:
            for _ in range(1200):
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
            assert client.get("/v1/models").status_code == 200
            assert client.get("/ui/", params={"token": "t0ken-for-the-test"}).status_code == 200
        print(sorted({m.split('.')[0] for m in sys.modules} & set(%(heavy)r)), flush=True)
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        os._exit(1)

threading.Thread(target=watch, daemon=True).start()
main(["--log-level", "WARNING", "gateway", "--config", %(cfg)r, "--engine", %(engine)r,
      "--port", "%(port)d", "--db", %(db)r])
"""


def test_the_gateway_command_in_front_of_a_url_engine_does_not_load_torch(tmp_path: Path) -> None:
    """A real ``harnessrl gateway`` process: started, answering, its dashboard opened, then asked."""
    cfg = write_run_config(tmp_path, {"gateway": {"admin_token": "t0ken-for-the-test"}})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = EngineServer().start()
    try:
        code = GATEWAY % {"port": port, "heavy": HEAVY, "cfg": str(cfg), "engine": engine.url,
                          "db": f"sqlite:///{tmp_path / 'store.db'}"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             check=False)
    finally:
        engine.stop()
    assert out.returncode == 0 and out.stdout.strip(), out.stderr[-3000:]
    assert eval(out.stdout.strip().splitlines()[-1]) == []  # noqa: S307
