"""``Stack.start`` with ``engine.kind = "vllm"`` attached to a fake vLLM: the wiring the controller uses.

The trainer gets the LoRA hot-load publisher, the publisher knows the gateway, and a publish routes the
harness's next call to the new adapter with the new version stamp (the tiny random model keeps it fast).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from vllm_fakes import start_fake_vllm

from harnessrl.config import HarnessConfig
from harnessrl.engines.sglang import SglangNotSupported
from harnessrl.engines.vllm_publish import VllmLoraPublisher
from harnessrl.stack import Stack
from harnessrl.store import open_store


def test_stack_attaches_and_publishes_lora_through_the_gateway(tmp_path: Path) -> None:
    server, app = start_fake_vllm()
    cfg = HarnessConfig.model_validate({
        "run": {"dir": str(tmp_path / "run")},
        "engine": {"kind": "vllm", "model": "tiny", "urls": [server.url]},
        "gateway": {"port": 0, "render_mode": "engine", "engine_model": "base"},
    })
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    stack = Stack.start(cfg, store, run_id=None, train=True)
    try:
        assert isinstance(stack.trainer.publisher, VllmLoraPublisher)
        assert stack.trainer.publisher.gateway is not None
        admin = httpx.Client(base_url=stack.gateway_url, headers={"Authorization": f"Bearer {stack.admin_token}"})
        r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
        assert stack.trainer.publish() == 1
        assert [c[0] for c in app.lora_calls] == ["load_lora_adapter"]
        assert Path(app.adapters["policy-v1"]).parent == tmp_path / "run" / "policies"
        out = httpx.post(r["base_url"] + "/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                         json={"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert out.status_code == 200, out.text
        assert app.engine.requests[-1]["model"] == "policy-v1"
        assert [c.policy_version for c in store.get_calls(r["rollout_id"])] == [1]
    finally:
        stack.close()
        store.close()
        server.stop()


def test_stack_refuses_sglang_training_with_the_missing_pieces(tmp_path: Path) -> None:
    cfg = HarnessConfig.model_validate({"run": {"dir": str(tmp_path)},
                                        "engine": {"kind": "sglang", "urls": ["http://127.0.0.1:9/v1"]}})
    store = open_store("sqlite:///:memory:")
    with pytest.raises(SglangNotSupported, match="update_weights_from_disk"):
        Stack.start(cfg, store, run_id=None, train=True)
    store.close()
