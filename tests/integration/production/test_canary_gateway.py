"""The canary through the real production gateway and a real embedded engine (the tiny model): two versions
served side by side, each session's calls recorded with its arm's version and produced by that version's
weights; a worse candidate rolled back, a better one promoted, every decision recorded and shown by the
admin API and /metrics; a restarted gateway and engine serve what was served before."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from tiny_adapters import greedy, trained_adapter

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.models import tiny_model
from harnessrl.production.canary_stats import in_canary
from harnessrl.production.config import CanaryConfig, FeedbackConfig, ProductionConfig
from harnessrl.production.plugin import production_plugin
from harnessrl.production.windows import close_due_windows
from harnessrl.store import Store

ADMIN = "admin-secret"
DEP = "app"
RULE = CanaryConfig(fraction=0.5, min_sessions=3, max_regression=0.05, evaluate_interval_s=0.3)
FEEDBACK = FeedbackConfig(window_s=60.0)


@pytest.fixture
def engine() -> Iterator:
    model, tokenizer = tiny_model()
    server = start_server(EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=8,
                                                                        context_window=256)), owns_engine=True)
    yield server
    server.close()


class Prod:
    def __init__(self, store: Store, engine_url: str) -> None:
        cfg = GatewayConfig(port=0, engines=[engine_url], admin_token=ADMIN, health_interval_s=0.2,
                            mode="production")
        self.server = GatewayServer(Gateway(store, cfg, plugins=[production_plugin(ProductionConfig(
            canary=RULE, feedback=FEEDBACK))])).start()
        self.admin = httpx.Client(base_url=self.server.url, timeout=120, headers={"Authorization": f"Bearer {ADMIN}"})

    def close(self) -> None:
        self.admin.close()
        self.server.stop()


def _sessions_for(version: int, n: int, tag: str) -> tuple[list[str], list[str]]:
    """n session ids the canary of ``version`` takes and n it leaves to stable (fraction 0.5)."""
    canary, stable = [], []
    i = 0
    while len(canary) < n or len(stable) < n:
        sid = f"{tag}-{i}"
        (canary if in_canary(DEP, version, sid, RULE.fraction) else stable).append(sid)
        i += 1
    return canary[:n], stable[:n]


def _talk(prod: Prod, key: str, sid: str) -> httpx.Response:
    r = httpx.post(f"{prod.server.url}/p/{DEP}/s/{sid}/v1/chat/completions", timeout=120,
                   headers={"Authorization": f"Bearer {key}"},
                   json={"model": "any", "messages": [{"role": "user", "content": f"hello {sid}"}],
                         "max_tokens": 6, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.headers["x-session-id"] == sid
    return r


def _rate(prod: Prod, key: str, store: Store, scores: dict[str, float]) -> None:
    for sid, value in scores.items():
        r = httpx.post(f"{prod.server.url}/p/{DEP}/feedback", headers={"Authorization": f"Bearer {key}"},
                       json={"session_id": sid, "name": "thumbs", "value": value}, timeout=30)
        assert r.status_code == 201, r.text
    later = time.time() + FEEDBACK.window_s + 1  # the windows close window_s after each session's last call
    close_due_windows(store, FEEDBACK, now=later, deployment=DEP)
    assert all(store.get_session(DEP, s).outcome_status == "scored" for s in scores)


def _decided(prod: Prod, action: str) -> dict:
    """Wait for the gateway's periodic evaluation to take ``action``; the canary's view then."""
    deadline = time.time() + 30
    while time.time() < deadline:
        view = prod.admin.get(f"/admin/deployments/{DEP}/canary").json()
        acts = [d["action"] for d in view["decisions"] if d["action"] != "hold"]
        if acts and acts[-1] == action and not view["running"]:  # decided and applied
            return view
        time.sleep(0.1)
    raise AssertionError(f"no {action} within 30 s: {view['decisions']}")


def _check_served(store: Store, sid: str, arm: str, version: int, weights: torch.nn.Module) -> None:
    """The session's arm and version are stored, and its call was produced by ``weights`` (greedy)."""
    s = store.get_session(DEP, sid)
    assert (s.arm, s.policy_version) == (arm, version), sid
    (call,) = store.get_calls(s.rollout_id)
    assert call.policy_version == version
    assert call.completion_token_ids == greedy(weights, call.prompt_token_ids, len(call.completion_token_ids))


def test_worse_candidate_rolled_back_better_promoted(store: Store, engine, tmp_path: Path) -> None:  # noqa: ANN001
    base, worse, better = tiny_model()[0].eval(), trained_adapter(1), trained_adapter(2)
    prod = Prod(store, engine.base_url)
    try:
        assert prod.admin.post("/admin/deployments", json={"name": DEP}).status_code == 201
        key = prod.admin.post(f"/admin/deployments/{DEP}/keys", json={"label": "t"}).json()["api_key"]
        run_id = store.get_deployment(DEP).run_id
        for version, model in ((1, worse), (2, better)):  # what the off-policy loop publishes: checkpoints
            model.save_pretrained(tmp_path / f"step_{version}" / "adapter")
            store.add_policy_version(version, str(tmp_path / f"step_{version}"), run_id=run_id)

        # -- a worse candidate: served beside stable, then rolled back --------------------------------
        r = prod.admin.post(f"/admin/deployments/{DEP}/canary", json={"candidate_version": 1})
        assert r.status_code == 201, r.text
        assert [(a["arm"], a["version"], a["engine_model"], a["fraction"]) for a in r.json()["arms"]] == [
            ("stable", 0, None, 0.5), ("canary", 1, "app-v1", 0.5)]
        canary_ids, stable_ids = _sessions_for(1, 3, "a")
        for sid in canary_ids + stable_ids:
            _talk(prod, key, sid)
        for sid in canary_ids:
            _check_served(store, sid, "canary", 1, worse)
        for sid in stable_ids:
            _check_served(store, sid, "stable", 0, base)
        metrics = httpx.get(f"{prod.server.url}/metrics").text
        assert 'harnessrl_canary_version{deployment="app",arm="canary"} 1' in metrics
        assert 'harnessrl_canary_fraction{deployment="app",arm="canary"} 0.5' in metrics
        _rate(prod, key, store, dict.fromkeys(canary_ids, 0.0) | dict.fromkeys(stable_ids, 1.0))
        view = _decided(prod, "rollback")  # by the gateway itself, no admin call
        assert "trails by 1.0000" in view["decisions"][-1]["reason"]
        deadline = time.time() + 10  # the decision is stored first, then applied
        while "app-v1" in engine.engine.adapters and time.time() < deadline:
            time.sleep(0.05)
        assert "app-v1" not in engine.engine.adapters  # dropped from the engine
        sid = "after-rollback"
        _talk(prod, key, sid)
        _check_served(store, sid, "stable", 0, base)

        # -- a better candidate: promoted, then serves every new session ------------------------------
        assert prod.admin.post(f"/admin/deployments/{DEP}/canary", json={"candidate_version": 2}).status_code == 201
        canary_ids, stable_ids = _sessions_for(2, 3, "b")
        for sid in canary_ids + stable_ids:
            _talk(prod, key, sid)
        for sid in canary_ids:
            _check_served(store, sid, "canary", 2, better)
        _rate(prod, key, store, dict.fromkeys(canary_ids, 1.0) | dict.fromkeys(stable_ids, 0.5))
        _decided(prod, "promote")
        for sid in ("c-0", "c-1", "c-2", "c-3"):
            _talk(prod, key, sid)
            _check_served(store, sid, "stable", 2, better)

        view = prod.admin.get(f"/admin/deployments/{DEP}/canary").json()
        assert view["arms"] == [{"arm": "stable", "version": 2, "engine_model": "app-v2", "fraction": 1.0}]
        decisions = [(d["action"], d["stable_version"], d["candidate_version"]) for d in view["decisions"]
                     if d["action"] != "hold"]
        assert decisions == [("start", 0, 1), ("rollback", 0, 1), ("start", 0, 2), ("promote", 0, 2)]
        holds = [d for d in view["decisions"] if d["action"] == "hold"]
        assert holds and all("waiting for 3 decided sessions per arm" in d["reason"] for d in holds)
        assert [d["index"] for d in view["decisions"]] == list(range(len(view["decisions"])))
        evidence = {a["arm"]: a for a in view["decisions"][-1]["arms"]}
        assert (evidence["canary"]["decided"], evidence["canary"]["mean"]) == (3, 1.0)
        assert (evidence["stable"]["decided"], evidence["stable"]["mean"]) == (3, 0.5)
    finally:
        prod.close()

    # -- a restart of gateway and engine (same store): the promoted version is loaded again and served --
    model, tokenizer = tiny_model()
    fresh = start_server(EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", context_window=256)),
                         owns_engine=True)
    prod = Prod(store, fresh.base_url)
    try:
        assert fresh.engine.adapters == {}
        key = prod.admin.post(f"/admin/deployments/{DEP}/keys", json={"label": "t2"}).json()["api_key"]
        _talk(prod, key, "after-restart")
        _check_served(store, "after-restart", "stable", 2, better)
        assert fresh.engine.adapters == {"app-v2": 2}  # from the checkpoint folder the decisions name
        assert prod.admin.get(f"/admin/deployments/{DEP}/canary").json()["arms"][0]["version"] == 2
    finally:
        prod.close()
        fresh.close()


def test_admin_refusals(store: Store, engine) -> None:  # noqa: ANN001
    prod = Prod(store, engine.base_url)
    try:
        prod.admin.post("/admin/deployments", json={"name": DEP})
        r = prod.admin.post(f"/admin/deployments/{DEP}/canary", json={"candidate_version": 4})
        assert r.status_code == 400 and "no checkpoint in the store" in r.json()["error"]["message"]
        r = prod.admin.post(f"/admin/deployments/{DEP}/canary", json={"candidate_version": "4"})
        assert r.status_code == 400 and "'candidate_version' is required" in r.json()["error"]["message"]
        r = prod.admin.post("/admin/deployments/nope/canary", json={"candidate_version": 1})
        assert r.status_code == 404
        assert httpx.get(f"{prod.server.url}/admin/deployments/{DEP}/canary").status_code == 401
        r = prod.admin.get(f"/admin/deployments/{DEP}/canary")
        assert r.status_code == 200 and r.json()["running"] is False and r.json()["decisions"] == []
        r = prod.admin.post(f"/admin/deployments/{DEP}/canary/evaluate")  # nothing to decide
        assert r.status_code == 200 and r.json()["decision"] is None
    finally:
        prod.close()
