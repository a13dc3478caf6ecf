"""The engine URL check against a real HTTP server on loopback that serves its models under /v1 only."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from fakes.fake_engine import EngineServer, FakeEngine

from harnessrl.engines.url_check import EngineURLError, alternative, check_engine_url, check_engine_urls


class _Handler(BaseHTTPRequestHandler):
    models_at = "/v1/models"
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == self.models_at:
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            self.send_response(self.status)
        else:
            body = b'{"detail": "Not Found"}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(models_at: str = "/v1/models", status: int = 200) -> Iterator[str]:
    handler = type("H", (_Handler,), {"models_at": models_at, "status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def engine() -> Iterator[str]:
    """The server's root URL; its models route is at /v1/models only."""
    yield from _serve()


def test_a_url_without_v1_is_corrected_with_a_warning(engine: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harnessrl.engines.url_check"):
        assert check_engine_url(engine) == engine + "/v1"
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert f"GET {engine}/models answered HTTP 404" in record.getMessage()
    assert f"using {engine}/v1" in record.getMessage()


def test_a_right_url_is_kept_without_a_word(engine: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="harnessrl.engines.url_check"):
        assert check_engine_url(engine + "/v1/") == engine + "/v1"
    assert caplog.records == []
    # a pasted endpoint gives its base; "embedded" is the caller's to start
    assert check_engine_urls([engine + "/v1/chat/completions", "embedded"]) == [engine + "/v1", "embedded"]


def test_a_server_with_no_models_route_at_either_is_refused_naming_both() -> None:
    for root in _serve(models_at="/api/models"):
        with pytest.raises(EngineURLError) as err:
            check_engine_url(root)
        message = str(err.value)
        assert f"GET {root}/models answered HTTP 404" in message
        assert f"GET {root}/v1/models answered HTTP 404" in message
        assert "http://HOST:PORT/v1" in message


def test_an_engine_that_is_not_up_yet_is_left_for_the_gateway_to_wait_for() -> None:
    with socket.socket() as s:  # a port nothing listens on: connection refused, as before a launch
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert check_engine_url(f"http://127.0.0.1:{port}") == f"http://127.0.0.1:{port}"
    for root in _serve(status=503):  # up, still loading its model: 503 at /v1/models, 404 at /models
        assert check_engine_url(root + "/v1") == root + "/v1"


def test_alternative() -> None:
    assert alternative("http://h:1") == "http://h:1/v1"
    assert alternative("http://h:1/v1/") == "http://h:1"
    assert alternative("http://h:1/openai/v1/completions") == "http://h:1/openai/v1"


def _gateway(engine_url: str, tmp_path: Path, port: int = 0) -> subprocess.Popen:
    """``harnessrl gateway --engine ENGINE_URL`` as a user runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway", "--engine", engine_url,
         "--db", f"sqlite:///{tmp_path / 'gw.db'}", "--port", str(port)],
        env={**os.environ, "HARNESSRL_ADMIN_TOKEN": "admin"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)


def test_the_gateway_command_serves_calls_given_an_engine_url_without_v1(tmp_path: Path) -> None:
    """The newcomer's case: an OpenAI-compatible server's root URL. Calls used to get the engine's 404."""
    engine = EngineServer(FakeEngine()).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = engine.url.removesuffix("/v1")
    proc = _gateway(root, tmp_path, port)
    try:
        gw = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the gateway did not start"
            try:
                if httpx.get(f"{gw}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        rollout = httpx.post(f"{gw}/admin/rollouts", headers={"Authorization": "Bearer admin"},
                             json={"task_id": "t", "group_id": "g"}).json()
        r = httpx.post(f"{rollout['base_url']}/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "hi"}]}, headers={"Authorization": f"Bearer {rollout['api_key']}"}, timeout=30)
        assert r.status_code == 200, r.text  # was the engine's 404: POST {root}/chat/completions
        assert r.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        stderr = proc.communicate(timeout=30)[1]
        engine.stop()
    assert f"using {root}/v1" in stderr and "WARNING" in stderr


def test_the_gateway_command_refuses_a_server_without_models_routes(tmp_path: Path) -> None:
    for root in _serve(models_at="/api/models"):
        proc = _gateway(root, tmp_path)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 1
        assert f"harnessrl: engine {root} serves no OpenAI models route" in stderr
        assert "Traceback" not in stderr


def test_engine_urls_of_the_run_config_are_checked_when_the_stack_starts(tmp_path: Path) -> None:
    """``[engine] urls`` (kinds openai, vllm, sglang) go through the same check: the corrected URL is what the
    gateway forwards to, and what the vLLM/SGLang wiring reads."""
    from harnessrl.config import HarnessConfig
    from harnessrl.stack import Stack
    from harnessrl.store import open_store

    engine = EngineServer(FakeEngine()).start()
    root = engine.url.removesuffix("/v1")
    cfg = HarnessConfig.model_validate({"run": {"dir": str(tmp_path / "run")},
                                        "engine": {"kind": "openai", "urls": [root]},
                                        "gateway": {"port": 0, "render_mode": "engine"}})
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    stack = Stack.start(cfg, store, run_id=None, train=False)
    try:
        assert cfg.engine.urls == [engine.url]
        admin = httpx.Client(base_url=stack.gateway_url, headers={"Authorization": f"Bearer {stack.admin_token}"})
        r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
        out = httpx.post(r["base_url"] + "/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                         json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
        assert out.status_code == 200, out.text
    finally:
        stack.close()
        store.close()
        engine.stop()
