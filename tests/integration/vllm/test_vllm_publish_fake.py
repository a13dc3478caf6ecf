"""Publishing to vLLM without vLLM: the publishers' HTTP calls against a fake vLLM behind a real gateway.

Checks what the real-vLLM test cannot afford to vary: adapters loaded on every engine and the old one
unloaded, the gateway routing later calls to the new adapter name and stamping the new version, errors
that say what to do, and the admin API's ``engine_model`` switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from peft import LoraConfig, get_peft_model
from vllm_fakes import FakeVllm, start_fake_vllm

from harnessrl.engines.vllm import VllmError
from harnessrl.engines.vllm_publish import (
    GatewayLink,
    VllmInPlacePublisher,
    VllmLoraPublisher,
    VllmReloadPublisher,
)
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.models.tiny import tiny_model
from harnessrl.store import Store, open_store
from harnessrl.weights.publish import FolderPublisher

TOKEN = "admin-secret"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    yield s
    s.close()


@pytest.fixture
def fakes() -> Iterator[list[tuple]]:
    started = [start_fake_vllm(), start_fake_vllm()]
    yield started
    for server, _ in started:
        server.stop()


@pytest.fixture
def gateway(store: Store, fakes: list) -> Iterator[GatewayServer]:
    cfg = GatewayConfig(port=0, engines=[s.url for s, _ in fakes], admin_token=TOKEN, engine_model="base",
                        health_interval_s=0.2, render_mode="engine")
    server = GatewayServer(Gateway(store, cfg)).start()
    yield server
    server.stop()


def _lora_model() -> object:
    model, _ = tiny_model()
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            lora_dropout=0.0, task_type="CAUSAL_LM"))


def _chat(gw: GatewayServer) -> tuple[str, OpenAI]:
    admin = httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {TOKEN}"})
    r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    client = OpenAI(base_url=r["base_url"], api_key=r["api_key"], max_retries=0)
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    return r["rollout_id"], client


def test_lora_publish_loads_everywhere_switches_gateway_and_unloads_old(
        tmp_path: Path, store: Store, fakes: list, gateway: GatewayServer) -> None:
    apps: list[FakeVllm] = [app for _, app in fakes]
    publisher = VllmLoraPublisher(FolderPublisher(tmp_path / "policies"), [s.url for s, _ in fakes])
    publisher.attach_gateway(gateway.url, TOKEN)
    model = _lora_model()
    rid, client = _chat(gateway)  # version 0 on the base model

    path1 = publisher.publish(model, 1)
    assert Path(path1, "adapter_config.json").is_file() and Path(path1).is_absolute()
    for app in apps:
        assert app.lora_calls == [("load_lora_adapter", {"lora_name": "policy-v1", "lora_path": path1})]
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "again"}], max_tokens=4)

    path2 = publisher.publish(model, 2)
    for app in apps:
        assert [c[0] for c in app.lora_calls] == ["load_lora_adapter", "load_lora_adapter", "unload_lora_adapter"]
        assert app.lora_calls[2][1] == {"lora_name": "policy-v1"}
        assert app.adapters == {"policy-v2": path2}
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "third"}], max_tokens=4)

    calls = store.get_calls(rid)
    assert [c.policy_version for c in calls] == [0, 1, 2]
    sent = [b["model"] for app in apps for b in app.engine.requests]
    assert sorted(sent) == ["base", "policy-v1", "policy-v2"]  # each call went to the adapter of its version
    assert all(c.completion_token_ids for c in calls)


def test_republishing_a_version_replaces_the_adapter(tmp_path: Path, fakes: list, gateway: GatewayServer) -> None:
    server, app = fakes[0]
    publisher = VllmLoraPublisher(FolderPublisher(tmp_path / "p"), [server.url],
                                  gateway=GatewayLink(gateway.url, TOKEN))
    model = _lora_model()
    publisher.publish(model, 3)
    fresh = VllmLoraPublisher(FolderPublisher(tmp_path / "p"), [server.url],
                              gateway=GatewayLink(gateway.url, TOKEN))  # a resumed run re-publishes v3
    fresh.publish(model, 3)
    assert [c[0] for c in app.lora_calls] == ["load_lora_adapter", "load_lora_adapter", "unload_lora_adapter",
                                              "load_lora_adapter"]
    assert list(app.adapters) == ["policy-v3"]


def test_load_failure_names_the_cause_and_leaves_the_gateway_alone(
        tmp_path: Path, fakes: list, gateway: GatewayServer) -> None:
    server, app = fakes[0]
    app.fail_load = True
    publisher = VllmLoraPublisher(FolderPublisher(tmp_path / "p"), [server.url],
                                  gateway=GatewayLink(gateway.url, TOKEN))
    with pytest.raises(VllmError, match="max_lora_rank"):
        publisher.publish(_lora_model(), 1)
    assert gateway.gateway.config.engine_model == "base"
    assert gateway.gateway.gate.policy_version == 0


def test_lora_publisher_refuses_a_full_model(tmp_path: Path) -> None:
    model, _ = tiny_model()
    with pytest.raises(VllmError, match="VllmReloadPublisher"):
        VllmLoraPublisher(FolderPublisher(tmp_path), ["http://127.0.0.1:9/v1"]).publish(model, 1)


def test_admin_engine_model_switch_is_validated(gateway: GatewayServer) -> None:
    admin = httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"})
    r = admin.post("/admin/policy_version", json={"version": 1, "engine_model": ""})
    assert r.status_code == 400 and "engine_model" in r.json()["error"]["message"]
    assert gateway.gateway.gate.policy_version == 0
    r = admin.post("/admin/policy_version", json={"version": 4, "engine_model": "policy-v4"})
    assert r.status_code == 200
    status = admin.get("/admin/status").json()
    assert status["policy_version"] == 4
    assert {e["model"] for e in status["engines"]} == {"policy-v4"}
    assert gateway.gateway.config.engine_model == "policy-v4"


class _FakeLaunched:
    """Stands in for a launched ``VllmEngine``: records restarts."""

    launched = True
    served_name = "base"

    def __init__(self) -> None:
        self.restarts: list[str] = []

    def restart(self, model_path: str) -> float:
        self.restarts.append(model_path)
        return 0.0


def test_reload_publisher_saves_full_weights_restarts_and_switches(
        tmp_path: Path, fakes: list, gateway: GatewayServer) -> None:
    engine = _FakeLaunched()
    publisher = VllmReloadPublisher(FolderPublisher(tmp_path / "p"), engine,  # type: ignore[arg-type]
                                    gateway=GatewayLink(gateway.url, TOKEN))
    model, _ = tiny_model()
    path = publisher.publish(model, 5)
    assert engine.restarts == [path] and Path(path, "config.json").is_file()
    assert gateway.gateway.gate.policy_version == 5 and gateway.gateway.config.engine_model == "base"


def test_reload_publisher_refuses_attached_servers(tmp_path: Path) -> None:
    class Attached:
        launched = False

    with pytest.raises(VllmError, match="LoRA"):
        VllmReloadPublisher(FolderPublisher(tmp_path), Attached())  # type: ignore[arg-type]


def test_in_place_publisher_loads_the_folder_into_every_engine_and_keeps_the_served_name(
        tmp_path: Path, store: Store, fakes: list, gateway: GatewayServer) -> None:
    apps: list[FakeVllm] = [app for _, app in fakes]
    for app in apps:
        app.dev_mode = True
    publisher = VllmInPlacePublisher(FolderPublisher(tmp_path / "p"), [s.url for s, _ in fakes],
                                     gateway=GatewayLink(gateway.url, TOKEN))
    rid, client = _chat(gateway)
    model, _ = tiny_model()
    path = publisher.publish(model, 2)
    assert Path(path, "model.safetensors").is_file() and Path(path).is_absolute()
    for app in apps:  # checked at start, then reloaded from the folder, then the stale prefix cache dropped
        assert app.dev_calls == [("is_paused", {}),
                                 ("collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": path}}),
                                 ("reset_prefix_cache", {})]
        assert app.lora_calls == []
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "again"}], max_tokens=4)
    assert [c.policy_version for c in store.get_calls(rid)] == [0, 2]
    assert gateway.gateway.config.engine_model == "base"  # same name, new weights
    assert [b["model"] for app in apps for b in app.engine.requests] == ["base", "base"]


def test_in_place_publisher_refuses_at_start_an_engine_without_the_dev_routes(tmp_path: Path, fakes: list) -> None:
    (server, _), (other, app) = fakes
    app.dev_mode = True
    with pytest.raises(VllmError, match="VLLM_SERVER_DEV_MODE=1") as err:
        VllmInPlacePublisher(FolderPublisher(tmp_path), [other.url, server.url])
    assert server.url.removesuffix("/v1") in str(err.value)


def test_in_place_publisher_failure_names_the_folder_and_leaves_the_gateway_alone(
        tmp_path: Path, fakes: list, gateway: GatewayServer) -> None:
    server, app = fakes[0]
    app.dev_mode = True
    publisher = VllmInPlacePublisher(FolderPublisher(tmp_path / "p"), [server.url],
                                     gateway=GatewayLink(gateway.url, TOKEN))
    with pytest.raises(VllmError, match="VllmLoraPublisher"):
        publisher.publish(_lora_model(), 1)

    class Broken(FolderPublisher):  # a folder the engine cannot read
        def publish(self, model: object, version: int) -> str:  # type: ignore[override]
            return str(tmp_path / "missing")

    publisher.folder = Broken(tmp_path / "q")
    with pytest.raises(VllmError, match="reload_weights from .*missing"):
        publisher.publish(tiny_model()[0], 1)
    assert gateway.gateway.gate.policy_version == 0


def test_keep_old_serves_calls_in_flight_on_the_old_adapter_and_unloads_it_after(
        tmp_path: Path, store: Store, fakes: list, gateway: GatewayServer) -> None:
    """``[engine] on_update = "keep"``: the publish does not wait for a long call; that call finishes on the
    adapter it was sent to (recorded with that version), new calls go to the new adapter, and the old one is
    unloaded once no call uses it."""
    import threading
    import time

    apps: list[FakeVllm] = [app for _, app in fakes]
    publisher = VllmLoraPublisher(FolderPublisher(tmp_path / "p"), [s.url for s, _ in fakes],
                                  gateway=GatewayLink(gateway.url, TOKEN), keep_old=True, retire_poll_s=0.05)
    model = _lora_model()
    publisher.publish(model, 1)
    admin = httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"})
    r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    slow = OpenAI(base_url=r["base_url"], api_key=r["api_key"], max_retries=0)
    for app in apps:
        app.engine.token_delay_s = 0.05  # 40 tokens: ~2 s
    done: list[str] = []
    t = threading.Thread(target=lambda: done.append("".join(
        c.choices[0].delta.content or "" for c in slow.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "long"}], max_tokens=40, stream=True)
        if c.choices)))
    t.start()
    while not gateway.gateway.pool.in_flight_models.get("policy-v1"):
        time.sleep(0.01)
    t0 = time.monotonic()
    publisher.publish(model, 2)
    assert time.monotonic() - t0 < 1.5 and t.is_alive(), "the publish waited for the call in flight"
    assert publisher.retiring == ["policy-v1"]
    assert all(set(app.adapters) == {"policy-v1", "policy-v2"} for app in apps)  # two versions served
    for app in apps:
        app.engine.token_delay_s = 0.0
    rid, client = _chat(gateway)  # a new call goes to the new adapter at once
    t.join(30)
    assert done and done[0]
    deadline = time.monotonic() + 10
    while publisher.retiring and time.monotonic() < deadline:
        time.sleep(0.05)
    assert publisher.retiring == [] and all(set(app.adapters) == {"policy-v2"} for app in apps)
    (long_call,) = store.get_calls(r["rollout_id"])
    assert long_call.policy_version == 1 and long_call.completion_token_ids and long_call.error is None
    assert [c.policy_version for c in store.get_calls(rid)] == [2]
    sent = [b["model"] for app in apps for b in app.engine.requests]
    assert sorted(sent) == ["policy-v1", "policy-v2"]


def test_a_call_that_waited_through_an_update_goes_to_the_model_its_version_names(
        tmp_path: Path, store: Store, fakes: list, gateway: GatewayServer) -> None:
    """A call arriving during the drain waits at the gate; after the switch it is stamped with the new version
    and must be sent to the new adapter, not to the model that was current when it arrived."""
    import threading
    import time

    apps: list[FakeVllm] = [app for _, app in fakes]
    publisher = VllmLoraPublisher(FolderPublisher(tmp_path / "p"), [s.url for s, _ in fakes],
                                  gateway=GatewayLink(gateway.url, TOKEN))
    admin = httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"})
    r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    client = OpenAI(base_url=r["base_url"], api_key=r["api_key"], max_retries=0)
    assert admin.post("/admin/pause").json()["drained"]
    waiter = threading.Thread(target=client.chat.completions.create, kwargs={
        "model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    waiter.start()
    while not gateway.gateway.gate.waiting:
        time.sleep(0.01)
    publisher.publish(_lora_model(), 1)
    admin.post("/admin/resume")
    waiter.join(30)
    (call,) = store.get_calls(r["rollout_id"])
    assert call.policy_version == 1 and call.error is None
    assert [b["model"] for app in apps for b in app.engine.requests] == ["policy-v1"]
