"""The canary on vLLM's runtime LoRA API (a fake vLLM over loopback that 404s any model it does not
serve): the candidate is hot-loaded under its own name beside the base, canary sessions' calls go to that
name and stable ones to the base, and a rolled-back candidate is unloaded (a canary session still going on
is served by the base from its next call)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vllm"))  # vllm_fakes

from vllm_fakes import start_fake_vllm  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.production.canary_stats import in_canary  # noqa: E402
from harnessrl.production.config import CanaryConfig, FeedbackConfig, ProductionConfig  # noqa: E402
from harnessrl.production.plugin import production_plugin  # noqa: E402
from harnessrl.production.windows import close_due_windows  # noqa: E402
from harnessrl.store import Store  # noqa: E402

ADMIN = "admin-secret"
RULE = CanaryConfig(fraction=0.5, min_sessions=2, max_regression=0.0, evaluate_interval_s=3600)
FEEDBACK = FeedbackConfig(window_s=60.0)


def test_candidate_hot_loaded_routed_and_unloaded(store: Store, tmp_path: Path) -> None:
    server, vllm = start_fake_vllm()
    cfg = GatewayConfig(port=0, engines=[server.url], admin_token=ADMIN, health_interval_s=0.2, mode="production")
    gw = GatewayServer(Gateway(store, cfg, plugins=[production_plugin(ProductionConfig(canary=RULE, feedback=FEEDBACK))])).start()
    admin = httpx.Client(base_url=gw.url, timeout=60, headers={"Authorization": f"Bearer {ADMIN}"})
    try:
        assert admin.post("/admin/deployments", json={"name": "app"}).status_code == 201
        key = admin.post("/admin/deployments/app/keys", json={"label": "t"}).json()["api_key"]
        folder = tmp_path / "v1"
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
        r = admin.post("/admin/deployments/app/canary", json={"candidate_version": 1, "path": str(folder)})
        assert r.status_code == 201, r.text
        assert vllm.adapters == {"app-v1": str(folder)}
        assert vllm.lora_calls[0] == ("load_lora_adapter", {"lora_name": "app-v1", "lora_path": str(folder),
                                                            "version": 1})
        def talk(sid: str) -> None:
            r = httpx.post(f"{gw.url}/p/app/s/{sid}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                           json={"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}, timeout=60)
            assert r.status_code == 200, r.text

        sids = [f"s{i}" for i in range(8)]
        arms = {s: "canary" if in_canary("app", 1, s, RULE.fraction) else "stable" for s in sids}
        assert set(arms.values()) == {"canary", "stable"}
        for sid in sids:
            vllm.engine.requests.clear()
            talk(sid)
            (sent,) = vllm.engine.requests
            assert sent["model"] == ("app-v1" if arms[sid] == "canary" else "base"), sid
            s = store.get_session("app", sid)
            assert (s.arm, s.policy_version) == (arms[sid], 1 if arms[sid] == "canary" else 0)
            (call,) = store.get_calls(s.rollout_id)
            assert call.policy_version == s.policy_version
        for sid in sids:  # the candidate is worse
            value = 0.0 if arms[sid] == "canary" else 1.0
            assert httpx.post(f"{gw.url}/p/app/feedback", headers={"Authorization": f"Bearer {key}"},
                              json={"session_id": sid, "name": "thumbs", "value": value}).status_code == 201
        close_due_windows(store, FEEDBACK, now=time.time() + 61, deployment="app")
        live = next(f"live{i}" for i in range(100) if in_canary("app", 1, f"live{i}", RULE.fraction))
        talk(live)  # a canary session still going on when the candidate is rolled back
        assert vllm.engine.requests[-1]["model"] == "app-v1"
        r = admin.post("/admin/deployments/app/canary/evaluate")
        assert r.json()["decision"]["action"] == "rollback", r.text
        assert vllm.adapters == {} and vllm.lora_calls[-1] == ("unload_lora_adapter", {"lora_name": "app-v1"})
        for sid in ("new", live):  # a new session, and the live canary one: both on the base now
            vllm.engine.requests.clear()
            talk(sid)
            assert vllm.engine.requests[0]["model"] == "base", sid
        calls = store.get_calls(store.get_session("app", live).rollout_id)
        assert [c.policy_version for c in calls] == [1, 0]  # each call recorded with the version serving it
    finally:
        admin.close()
        gw.stop()
        server.stop()
