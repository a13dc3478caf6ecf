"""Several policies trained side by side: one ``Trainer`` per policy behind the one-trainer face the
controller and the run loop use.

Each trained policy is its own LoRA adapter on the shared frozen base, with its own optimizer, estimator,
normalization and version. A step builds one batch per policy from the calls routed to it (``sampling.policy``
of each recorded call); advantages are computed inside each policy's batch, per task group, from the
rollout's reward (shared credit) or, where the rollout has it, the policy's own named reward (credit by
role). A policy whose step fails is reported and skipped; the others still update and publish.

``policy_version`` here is the run's (steps published, as with one policy: rollouts are stamped with it at
launch and staleness is counted in it); each policy's own version is ``versions[name]``, stamped on its calls.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.policies.config import PolicyConfig
from harnessrl.store.base import Store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.train_batch import TrainBatch, prepare_batch
from harnessrl.types import Call, Reward, Rollout

log = logging.getLogger(__name__)


def policy_training_config(base: TrainingConfig, policy: PolicyConfig) -> TrainingConfig:
    """``[training]`` with this policy's overrides (lora, lr, estimator, normalization)."""
    update: dict[str, Any] = {k: getattr(policy, k) for k in ("lr", "estimator", "normalization")
                              if getattr(policy, k) is not None}
    if policy.lora is not None:
        update["lora"] = policy.lora
    if base.lora is None and policy.lora is None:
        raise ValueError("several policies train LoRA adapters on one shared base: set [training.lora] "
                         "(or [policies.<name>.lora]), not lora = false")
    return base.model_copy(update=update)


def calls_of(calls: Iterable[Call], policy: str) -> list[Call]:
    """The calls a policy served (recorded by the gateway in ``sampling.policy``)."""
    return [c for c in calls if (c.sampling or {}).get("policy") == policy]


def credit(rewards: list[Reward], reward_name: str | None) -> list[Reward]:
    """Credit by role: the policy's own named outcome reward when the rollout has one (its latest value,
    as the rollout's ``final``); otherwise the rollout's rewards unchanged (shared credit)."""
    if reward_name is None:
        return rewards
    own = [r for r in rewards if r.call_index is None and r.name == reward_name]
    if not own:
        return rewards
    latest = max(own, key=lambda r: r.created_at)
    return [Reward(rollout_id=latest.rollout_id, value=latest.value, name="final", created_at=latest.created_at)]


@dataclass
class PolicyBatches:
    """One ``TrainBatch`` per trained policy; ``counts`` are the step's (the controller adds to them)."""

    batches: dict[str, TrainBatch]
    counts: Counter[str] = field(default_factory=Counter)


class PolicyTrainers:
    """The trainers of a run's trained policies, stepped, published and checkpointed one by one."""

    builds_batches = True  # the controller asks this object for the step's batches

    def __init__(self, trainers: dict[str, Any], configs: dict[str, TrainingConfig],
                 policies: dict[str, PolicyConfig], *, metrics: Any = None,
                 on_published: Callable[[str, int], None] | None = None) -> None:
        if not trainers:
            raise ValueError("no policy to train: every policy is frozen")
        self.trainers, self.configs, self.policies = trainers, configs, policies
        self.metrics = metrics
        self.on_published = on_published
        self.policy_version = 0
        self.step_count = 0
        self.objective = "policy_gradient"
        self.failed: dict[str, str] = {}  # policies whose last step failed, and why
        self._stepped: set[str] = set()

    @property
    def versions(self) -> dict[str, int]:
        return {name: t.policy_version for name, t in self.trainers.items()}

    @property
    def publisher(self) -> Any:
        return None

    @property
    def model(self) -> Any:  # a single model has no meaning here; kept for callers that only log it
        return next(iter(self.trainers.values())).model

    def batch_from_store(self, store: Store, rollouts: Iterable[Rollout | str]) -> PolicyBatches:
        items = []
        for r in rollouts:
            rollout = store.get_rollout(r) if isinstance(r, str) else r
            items.append((rollout, store.get_calls(rollout.id), store.get_rewards(rollout.id)))
        return self.prepare(items)

    def prepare(self, items: list[tuple[Rollout, list[Call], list[Reward]]]) -> PolicyBatches:
        batches = {}
        for name, config in self.configs.items():
            reward_name = self.policies[name].reward_name
            mine = [(ro, calls_of(calls, name), credit(list(rewards), reward_name)) for ro, calls, rewards in items]
            batches[name] = prepare_batch(mine, config)
        return PolicyBatches(batches)

    def step(self, batch: PolicyBatches) -> dict[str, Any]:
        """Step every policy on its batch; one failing does not stop the others (reported as ``failed``)."""
        self.step_count += 1
        merged: dict[str, Any] = {"step": self.step_count}
        self._stepped, self.failed = set(), {}
        for name, trainer in self.trainers.items():
            tb = batch.batches.get(name) or TrainBatch(samples=[])
            tb.counts.update(batch.counts)
            try:
                metrics = trainer.step(tb)
            except Exception as exc:  # noqa: BLE001 - one policy's failure must not block the others
                log.exception("policy %s: training step %d failed", name, self.step_count)
                self.failed[name] = f"{type(exc).__name__}: {exc}"
                merged[f"policy/{name}/failed"] = 1
                continue
            self._stepped.add(name)
            merged.update({f"policy/{name}/{k}": v for k, v in metrics.items() if k != "step"})
        merged["policies/failed"] = len(self.failed)
        merged.update(_summary(merged, sorted(self._stepped)))
        if self.metrics is not None:
            self.metrics.write(self.step_count, merged)
        return merged

    def publish(self) -> int:
        """Publish each policy that stepped (its own next version); the run's version moves by one."""
        for name in sorted(self._stepped):
            try:
                version = self.trainers[name].publish()
            except Exception as exc:  # noqa: BLE001 - the others still publish
                log.exception("policy %s: publishing failed", name)
                self.failed[name] = f"publish: {type(exc).__name__}: {exc}"
                continue
            if self.on_published is not None:
                self.on_published(name, version)
        self.policy_version += 1
        return self.policy_version

    def save_checkpoint(self, path: str | Path) -> Path:
        """One folder per policy under the step's checkpoint (each: adapter, optimizer, its version)."""
        import json

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for name, trainer in self.trainers.items():
            trainer.save_checkpoint(path / "policies" / name)
        (path / "policies.json").write_text(json.dumps(
            {"step": self.step_count, "policy_version": self.policy_version, "versions": self.versions}))
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        import json

        path = Path(path)
        state = json.loads((path / "policies.json").read_text())
        for name, trainer in self.trainers.items():
            trainer.load_checkpoint(path / "policies" / name)
        self.step_count, self.policy_version = int(state["step"]), int(state["policy_version"])

    def close(self, failed: bool = False) -> None:
        for trainer in self.trainers.values():
            trainer.close(failed)
        if self.metrics is not None:
            self.metrics.close(failed)


_MEANS = ("loss", "clip_fraction", "approx_kl", "entropy", "reward/mean")


def _summary(merged: dict[str, Any], stepped: list[str]) -> dict[str, Any]:
    """The keys a one-policy step line reads, over the policies that stepped: means of the loss, clip,
    KL, entropy and reward; the most groups any policy trained. Per-policy values stay under policy/<name>/."""
    out: dict[str, Any] = {}
    for key in _MEANS:
        values = [merged[f"policy/{n}/{key}"] for n in stepped if isinstance(merged.get(f"policy/{n}/{key}"), float)]
        if values:
            out[key] = sum(values) / len(values)
    groups = [merged.get(f"policy/{n}/count/groups.trained", 0) for n in stepped]
    if groups:
        out["count/groups.trained"] = max(groups)
    return out
