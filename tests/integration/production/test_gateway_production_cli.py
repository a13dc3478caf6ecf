"""``harnessrl gateway --mode production`` as a real process: deployments from the config file, a key
from the admin API, a call through the openai client, and the session's call count written at shutdown
(the last batched touch is flushed when the gateway stops)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
from run_config import write_run_config

from harnessrl.store import open_store

ADMIN = "cli-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_gateway_command_serves_production(tmp_path: Path, engine_server) -> None:  # noqa: ANN001
    config = write_run_config(tmp_path, {"production": {"record_fraction": 1.0, "deployments": {"support": {}}}})
    db, port = tmp_path / "prod.db", _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "gateway", "--mode", "production",
         "--config", str(config), "--engine", engine_server.url, "--db", f"sqlite:///{db}", "--port", str(port)],
        env={**os.environ, "HARNESSRL_ADMIN_TOKEN": ADMIN}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.1)
        admin = {"Authorization": f"Bearer {ADMIN}"}
        r = httpx.post(f"{url}/admin/deployments/support/keys", json={"label": "cli"}, headers=admin)
        assert r.status_code == 201, r.text  # the deployment came from the config file
        key = r.json()
        client = openai.OpenAI(base_url=key["base_url"], api_key=key["api_key"])
        raw = client.chat.completions.with_raw_response.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
            extra_headers={"X-Session-Id": "cli-1"})
        assert raw.headers["x-session-id"] == "cli-1" and raw.parse().choices[0].message.content
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    store = open_store(f"sqlite:///{db}")
    try:
        session = store.get_session("support", "cli-1")
        assert session.calls == 1 and session.recorded
        assert len(store.get_calls(session.rollout_id)) == 1
    finally:
        store.close()
