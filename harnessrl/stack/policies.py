"""Wiring several policies (``[policies]``) into a run's stack: engine adapters, the gateway's routes, one trainer each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.policies.config import ServedPolicy

if TYPE_CHECKING:
    import torch

    from harnessrl.config import HarnessConfig
    from harnessrl.policies.trainers import PolicyTrainers
    from harnessrl.store import Store


def trained(config: HarnessConfig) -> list[str]:
    return [n for n, p in config.policies.items() if not p.frozen]


def gateway_policies(config: HarnessConfig) -> dict[str, ServedPolicy]:
    """What the gateway sends the engines per policy. Embedded: the policy's adapter by name (frozen: the
    base, ``__base__``); vLLM: the base until a policy's first adapter is hot-loaded (the publisher then
    switches that policy to ``<name>-v<N>``)."""
    from harnessrl.engines.embedded.engine import BASE

    embedded = config.engine.kind == "embedded"
    out = {}
    for name, p in config.policies.items():
        if p.frozen:
            model = p.engine_model or (BASE if embedded else None)
        else:
            model = name if embedded else None
        out[name] = ServedPolicy(frozen=p.frozen, engine_model=model)
    return out


class AdapterPublisher:
    """Publishes one policy's adapter into the embedded engine under the policy's name (and to a folder)."""

    def __init__(self, engine: Any, name: str, folder: Any = None) -> None:
        self.engine, self.name, self.folder = engine, name, folder

    def publish(self, model: torch.nn.Module, version: int) -> str | None:
        from harnessrl.weights.publish import trainable_update

        path = self.folder.publish(model, version) if self.folder is not None else None
        update = trainable_update(model)
        if "lora" not in update:
            raise ValueError(f"policy {self.name}: several policies publish LoRA adapters only")
        self.engine.update_weights(lora=update["lora"], lora_config=update["lora_config"], version=version,
                                   adapter=self.name)
        return path


def make_policy_trainers(config: HarnessConfig, store: Store, run_id: str | None, engine: Any, tokenizer: Any,
                         vllm: Any = None) -> PolicyTrainers:
    """One LoRA ``Trainer`` per trained policy, all on one frozen base (the engine's, when it can be shared)."""

    from harnessrl.models import load_model
    from harnessrl.policies.trainers import PolicyTrainers, policy_training_config
    from harnessrl.training.metrics import MetricsWriter
    from harnessrl.training.shared_base import share_frozen_base, shares_engine_base
    from harnessrl.training.trackers import open_trackers
    from harnessrl.training.trainer import Trainer
    from harnessrl.weights.publish import FolderPublisher

    run_dir = config.run_dir
    base: Any = None  # the trainers' own base when the engine's cannot be shared
    share = engine is not None and shares_engine_base(engine.model, config.training, lora=True)
    if not share:
        base, tok = load_model(config.engine.model, dtype="float32")
        tokenizer = tokenizer or tok
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    trainers, configs = {}, {}
    for name in trained(config):
        cfg = policy_training_config(config.training, config.policies[name])
        model = share_frozen_base(engine.model if share else base)  # one base; each policy its own adapter
        folder = FolderPublisher(run_dir / "policies" / name, tokenizer=tokenizer)
        if vllm is not None:
            from harnessrl.engines.vllm_publish import VllmLoraPublisher

            publisher: Any = VllmLoraPublisher(folder, vllm.urls, policy=name,
                                               keep_old=config.engine.on_update == "keep")
        else:
            publisher = AdapterPublisher(engine, name)
        trainers[name] = Trainer(model, cfg, run_dir=None, publisher=publisher, store=None, run_id=run_id,
                                 pad_token_id=int(pad))
        configs[name] = cfg
    metrics = MetricsWriter(run_dir, open_trackers(config.training, Path(run_dir), run_id or run_dir.name))
    return PolicyTrainers(trainers, configs, dict(config.policies), metrics=metrics)


def attach(trainers: PolicyTrainers, gateway: Any) -> None:
    """After the gateway listens: each publish moves that policy's version in the gateway's router
    (in-process), or the vLLM publishers switch it over the admin API."""
    router = gateway.gateway.router
    vllm = False
    for t in trainers.trainers.values():
        if hasattr(t.publisher, "attach_gateway"):
            t.publisher.attach_gateway(gateway.url, gateway.gateway.admin_token)
            vllm = True
    if not vllm:
        trainers.on_published = lambda name, version: router.set_version(name, version)


def republish(trainers: PolicyTrainers, engine: Any) -> None:
    """A resumed run: serve every policy's checkpointed adapter again at its version."""
    for name, t in trainers.trainers.items():
        if t.policy_version > 0:
            t.publisher.publish(t.model, t.policy_version)
            if trainers.on_published is not None:
                trainers.on_published(name, t.policy_version)
