"""PolicyTrainers on the tiny model: each policy's adapter published into the embedded engine under its
name; a policy whose step fails keeps its version while the other advances; checkpoints hold each."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine
from harnessrl.models import tiny_model
from harnessrl.policies.config import PolicyConfig
from harnessrl.policies.trainers import PolicyBatches, PolicyTrainers, policy_training_config
from harnessrl.stack.policies import AdapterPublisher, republish
from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.shared_base import share_frozen_base
from harnessrl.training.train_batch import TrainBatch
from harnessrl.training.trainer import Trainer


@pytest.fixture
def setup():
    base, tokenizer = tiny_model()
    engine = EmbeddedEngine(base, tokenizer, EngineConfig(model="tiny"))
    engine.register_adapters(["planner", "solver"])
    training = TrainingConfig(lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    policies = {"planner": PolicyConfig(), "solver": PolicyConfig(lr=1e-3)}
    configs = {n: policy_training_config(training, p) for n, p in policies.items()}
    trainers = {n: Trainer(share_frozen_base(engine.model), configs[n], publisher=AdapterPublisher(engine, n))
                for n in policies}
    published: list[tuple[str, int]] = []
    pt = PolicyTrainers(trainers, configs, policies, on_published=lambda n, v: published.append((n, v)))
    yield pt, engine, published
    engine.close()


def test_one_policy_failing_does_not_block_the_other(setup, tmp_path: Path) -> None:
    pt, engine, published = setup

    def broken(batch: TrainBatch) -> dict:
        raise RuntimeError("out of memory (injected)")

    pt.trainers["planner"].step = broken  # fault injection: the planner's step fails
    metrics = pt.step(PolicyBatches({"planner": TrainBatch(samples=[]), "solver": TrainBatch(samples=[])}))
    assert metrics["policies/failed"] == 1 and metrics["policy/planner/failed"] == 1
    assert "policy/solver/loss" in metrics
    assert metrics["loss"] == metrics["policy/solver/loss"]  # the step line's summary: policies that stepped
    assert pt.publish() == 1
    assert published == [("solver", 1)]
    assert pt.versions == {"planner": 0, "solver": 1}
    assert engine.adapters == {"planner": 0, "solver": 1} and engine.version == 0
    assert "RuntimeError" in pt.failed["planner"]

    pt.save_checkpoint(tmp_path / "ckpt")
    pt.trainers["solver"].policy_version = 7
    pt.load_checkpoint(tmp_path / "ckpt")
    assert pt.versions == {"planner": 0, "solver": 1} and pt.policy_version == 1 and pt.step_count == 1
    republish(pt, engine)  # a resumed run serves each checkpointed adapter again at its version
    assert engine.adapters == {"planner": 0, "solver": 1} and published[-1] == ("solver", 1)


def test_engine_server_serves_the_adapter_a_request_names(setup) -> None:
    import httpx

    from harnessrl.engines.embedded import start_server

    pt, engine, _ = setup
    pt.step(PolicyBatches({}))
    pt.publish()  # both policies at version 1
    pt.step(PolicyBatches({}))
    pt.trainers["planner"].publish()  # the planner alone at 2
    server = start_server(engine)
    try:
        body = {"prompt": [1, 2, 3], "max_tokens": 2, "return_token_ids": True}
        versions = {model: httpx.post(f"{server.base_url}/completions", json={**body, "model": model}, timeout=60)
                    .json()["policy_version"] for model in ("planner", "solver", "__base__")}
        assert versions == {"planner": 2, "solver": 1, "__base__": 0}
    finally:
        server.close()
