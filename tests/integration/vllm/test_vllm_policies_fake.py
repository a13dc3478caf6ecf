"""Several policies on vLLM without vLLM: one adapter per policy hot-loaded on a fake vLLM behind a real
gateway; each call goes to its policy's adapter (the fake answers 404 for any other name) and is recorded
with its policy and that policy's version; an unrouted name is refused when configured so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import NotFoundError, OpenAI
from peft import LoraConfig, get_peft_model
from vllm_fakes import start_fake_vllm

from harnessrl.engines.vllm_publish import GatewayLink, VllmLoraPublisher
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.models.tiny import tiny_model
from harnessrl.policies import RoutingConfig, ServedPolicy
from harnessrl.store import Store, open_store
from harnessrl.weights.publish import FolderPublisher

TOKEN = "admin-secret"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    yield s
    s.close()


@pytest.fixture
def fake() -> Iterator[tuple]:
    server, app = start_fake_vllm()
    yield server, app
    server.stop()


def _gateway(store: Store, url: str, unmatched: str = "default") -> GatewayServer:
    policies = {"planner": ServedPolicy(), "solver": ServedPolicy(), "judge": ServedPolicy(frozen=True,
                                                                                            engine_model="base")}
    routing = RoutingConfig(models={"plan-model": "planner", "solve-model": "solver"}, default="solver",
                            unmatched=unmatched)
    cfg = GatewayConfig(port=0, engines=[url], admin_token=TOKEN, engine_model="base", health_interval_s=0.2,
                        render_mode="engine", policies=policies, routing=routing)
    return GatewayServer(Gateway(store, cfg)).start()


def _lora(seed: int) -> object:
    import torch

    torch.manual_seed(seed)
    model, _ = tiny_model()
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            lora_dropout=0.0, task_type="CAUSAL_LM"))


def _client(gw: GatewayServer) -> OpenAI:
    admin = httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {TOKEN}"})
    d = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "input": {}}).json()
    admin.close()
    return OpenAI(base_url=d["base_url"], api_key=d["api_key"], max_retries=0)


def _ask(client: OpenAI, model: str, **kw: object) -> None:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, **kw)


def test_each_policy_served_by_its_own_adapter_and_recorded(store: Store, fake: tuple, tmp_path: Path) -> None:
    server, app = fake
    gw = _gateway(store, server.url)
    try:
        link = GatewayLink(gw.url, TOKEN)
        pubs = {name: VllmLoraPublisher(FolderPublisher(tmp_path / name), [server.url], gateway=link, policy=name)
                for name in ("planner", "solver")}
        pubs["planner"].publish(_lora(1), 1)
        pubs["solver"].publish(_lora(2), 1)
        pubs["solver"].publish(_lora(3), 2)  # solver moves on; planner stays at v1
        assert set(app.adapters) == {"planner-v1", "solver-v2"}  # solver-v1 unloaded, planner-v1 kept

        client = _client(gw)
        before = len(app.engine.requests)
        _ask(client, "plan-model")
        _ask(client, "solve-model")
        _ask(client, "something-else")  # unmatched -> default (solver)
        _ask(client, "plan-model", extra_headers={"x-harnessrl-policy": "judge"})  # header wins: frozen judge
        sent = [r["model"] for r in list(app.engine.requests)[before:]]
        assert sent == ["planner-v1", "solver-v2", "solver-v2", "base"]

        rollout = store.list_rollouts()[0]
        calls = store.get_calls(rollout.id)
        assert [(c.sampling["policy"], c.policy_version) for c in calls] == [
            ("planner", 1), ("solver", 2), ("solver", 2), ("judge", 0)]
    finally:
        gw.stop()


def test_unmatched_model_refused_when_configured(store: Store, fake: tuple) -> None:
    server, _ = fake
    gw = _gateway(store, server.url, unmatched="refuse")
    try:
        client = _client(gw)
        with pytest.raises(NotFoundError, match="routed to no policy"):
            _ask(client, "gpt-4o")
        _ask(client, "planner")  # a policy's own name routes (served by the base until published)
    finally:
        gw.stop()


def test_stack_with_policies_on_vllm_publishes_each_policy_on_its_own(tmp_path: Path) -> None:
    """``Stack.start`` with [policies] attached to a fake vLLM: a trainer per policy, each hot-loading
    its own adapter and switching only its own calls; the run's version moves once per step."""
    from harnessrl.config import HarnessConfig
    from harnessrl.policies.trainers import PolicyBatches
    from harnessrl.stack import Stack

    server, app = start_fake_vllm()
    cfg = HarnessConfig.model_validate({
        "run": {"dir": str(tmp_path / "run")},
        "engine": {"kind": "vllm", "model": "tiny", "urls": [server.url]},
        "gateway": {"port": 0, "render_mode": "engine", "engine_model": "base"},
        "training": {"lora": {"r": 4, "alpha": 8}},
        "policies": {"planner": {}, "solver": {}},
        "routing": {"models": {"gpt-4o-mini": "planner", "gpt-4o": "solver"}},
    })
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    stack = Stack.start(cfg, store, run_id=None, train=True)
    try:
        trainers = stack.trainer
        assert sorted(trainers.trainers) == ["planner", "solver"]
        trainers.step(PolicyBatches({}))
        assert trainers.publish() == 1
        trainers.step(PolicyBatches({}))
        trainers.trainers["solver"].publish()  # the solver alone moves on
        assert set(app.adapters) == {"planner-v1", "solver-v2"}
        admin = httpx.Client(base_url=stack.gateway_url, headers={"Authorization": f"Bearer {stack.admin_token}"})
        r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
        client = OpenAI(base_url=r["base_url"], api_key=r["api_key"], max_retries=0)
        _ask(client, "gpt-4o-mini")
        _ask(client, "gpt-4o")
        assert [q["model"] for q in list(app.engine.requests)[-2:]] == ["planner-v1", "solver-v2"]
        assert [(c.sampling["policy"], c.policy_version) for c in store.get_calls(r["rollout_id"])] == [
            ("planner", 1), ("solver", 2)]
        assert Path(app.adapters["solver-v2"]).parent == tmp_path / "run" / "policies" / "solver"
    finally:
        stack.close()
        store.close()
        server.stop()
