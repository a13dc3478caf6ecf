"""The admin API (and the harness-facing routes it sits beside) never call the synchronous store on the
gateway's event loop: each store operation runs in a worker thread (docs/architecture.md, "The store and
the event loop"). A store call on the loop would stall every harness call in flight for its duration."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from conftest import start_gateway  # noqa: E402
from fakes.loop_guard_store import LoopGuardStore  # noqa: E402


def test_admin_and_harness_routes_call_the_store_from_worker_threads(store, engine_server) -> None:  # noqa: ANN001
    guard = LoopGuardStore(store)
    server = start_gateway(guard, [engine_server])  # type: ignore[arg-type]
    try:
        admin = httpx.Client(base_url=server.url, timeout=30,
                             headers={"Authorization": f"Bearer {server.gateway.admin_token}"})
        made = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "run_id": None}).json()
        rid, key = made["rollout_id"], {"Authorization": f"Bearer {made['api_key']}"}
        assert admin.post(f"/admin/rollouts/{rid}/status", json={"status": "running"}).status_code == 200
        chat = httpx.post(f"{server.url}/r/{rid}/v1/chat/completions", headers=key, timeout=30,
                          json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200, chat.text
        assert httpx.post(f"{server.url}/r/{rid}/reward", headers=key, json={"value": 0.5}).status_code == 201
        assert admin.get("/admin/rollouts").json()["data"][0]["id"] == rid
        detail = admin.get(f"/admin/rollouts/{rid}").json()
        assert len(detail["calls"]) == 1 and [w["value"] for w in detail["rewards"]] == [0.5]
        assert admin.post(f"/admin/rollouts/{rid}/status", json={"status": "succeeded"}).status_code == 200
        recorded = admin.post("/admin/policy_version", json={"version": 1, "record": True, "checkpoint_path": "/c"})
        assert recorded.status_code == 200, recorded.text
        assert [v.version for v in store.list_policy_versions()] == [1]
        admin.close()
    finally:
        server.stop()
    assert guard.on_loop == [], f"store called on the gateway's event loop: {guard.on_loop}"
