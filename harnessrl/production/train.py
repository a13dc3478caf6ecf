"""Off-policy training from production sessions: ``[run] source = "production"``.

The loop serves a deployment through the production gateway and, whenever enough recorded sessions have
a decided outcome (their feedback window closed, ``windows.py``) and are not trained yet, takes one
update on them with the ordinary ``Trainer``:

- **Staleness.** A session served by a version older than the trainer's minus ``max_staleness`` is
  dropped (marked ``STALE`` in the store, counted once as ``count/sessions.stale_dropped``).
- **Advantage.** Outcome minus a running mean, or a task group's mean (``advantages.py``), broadcast to
  every sample of the session's rollout, normalized per rollout like any training step.
- **Importance weights.** The recorded behaviour logprobs are those of the version that served the
  session, not the trainer's; the trainer's truncated importance sampling (``[training] tis_cap``, else
  ``[production.training] tis_cap``) weighs each token by ``min(p_trainer / p_behaviour, cap)``.
- **Publishing.** Each update is checkpointed (with its LoRA adapter folder), recorded as a policy
  version of the deployment's run, and offered as a **canary candidate** (``POST /admin/deployments/{d}/
  canary``): it never serves everyone before the canary promotes it. The next update waits for that
  decision; after a rollback the trainer goes back to the stable version's weights. A gateway without
  the canary API gets the version as its next served version instead (pause, publish, resume), and the
  console says so. The run ends once its last candidate is decided.

Sessions are marked trained after their checkpoint exists: a restarted loop trains none twice and
rebuilds the running mean from the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harnessrl.production.advantages import RunningMean, min_served_version, session_advantages
from harnessrl.production.canary_state import canary_state
from harnessrl.production.config import ProductionTrainingConfig
from harnessrl.store.base import Store
from harnessrl.store.feedback import SessionWindow
from harnessrl.training.advantages import weighted
from harnessrl.training.config import TrainingConfig
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import TrainBatch
from harnessrl.training.trainer_state import STATE as CHECKPOINT_STATE
from harnessrl.types import Call, SampleFidelity
from harnessrl.weights.checkpoints import save_checkpoint_atomic
from harnessrl.weights.versions import record_policy_version

log = logging.getLogger(__name__)

#: Inside a checkpoint folder: the peft adapter the canary loads (``canary._adapter_folder`` finds it).
ADAPTER = "adapter"


def task_key(calls: Sequence[Call]) -> str | None:
    """A session's task for ``group_by = "task"``: a digest of its first call's prompt token IDs (system
    and first user message as the engine saw them)."""
    if not calls:
        return None
    first = min(calls, key=lambda c: c.index)
    return hashlib.blake2b(repr(list(first.prompt_token_ids)).encode(), digest_size=12).hexdigest()


def production_batch(store: Store, sessions: Sequence[SessionWindow], config: TrainingConfig,
                     baseline: RunningMean, group_by: str = "none",
                     trainer_version: int | None = None, invert: bool = False) -> TrainBatch:
    """Samples of the sessions' rollouts with their advantages (``baseline`` is read, not updated)."""
    counts: Counter[str] = Counter()
    built: dict[str, tuple[str, list[Any]]] = {}
    outcomes: dict[str, float] = {}
    groups: dict[str, str] = {}
    for s in sessions:
        assert s.rollout_id is not None and s.outcome is not None
        calls = store.get_calls(s.rollout_id)
        rollout = store.get_rollout(s.rollout_id)
        made = build_samples(calls, rollout.group_id, config.samples, rollout_id=rollout.id)
        counts.update(made.counts)
        samples = [x for x in made.samples if x.fidelity != SampleFidelity.RETOKENIZED]
        if not samples:
            counts["sessions.no_samples"] += 1
            continue
        built[s.id] = (s.rollout_id, samples)
        outcomes[s.id] = s.outcome
        key = task_key(calls)
        if key is not None:
            groups[s.id] = key
        if trainer_version is not None:
            counts["sessions.staleness_max"] = max(counts["sessions.staleness_max"], trainer_version - s.policy_version)
    advantages = session_advantages(outcomes, baseline, groups if group_by == "task" else None)
    if invert:  # a deliberately worse update ([production.training] invert_feedback): away from what users liked
        advantages = {k: -a for k, a in advantages.items()}
    advantages = {k: weighted(a, config.positive_weight) for k, a in advantages.items()}
    if group_by == "task":
        counts["groups.trained"] = sum(1 for n in Counter(groups[s] for s in built).values() if n >= 2)
    batch = TrainBatch(samples=[], counts=counts)
    for sid, (rid, samples) in built.items():
        batch.rewards[rid] = outcomes[sid]
        batch.advantages[rid] = advantages[sid]
        batch.samples += [dataclasses.replace(x, advantage=advantages[sid]) for x in samples]
    counts["sessions.trained"] = len(built)
    counts["rollouts.trained"] = len(built)
    return batch


def off_policy_config(config: TrainingConfig, tis_cap: float) -> TrainingConfig:
    """The trainer's config: truncated importance sampling always on (``[training] tis_cap`` wins)."""
    return config if config.tis_cap is not None else config.model_copy(update={"tis_cap": tis_cap})


class _WithAdapter:
    """Checkpoint = the trainer's checkpoint + its LoRA adapter as a peft folder (what serving loads)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def save_checkpoint(self, path: Path) -> Path:
        self.trainer.save_checkpoint(path)
        save = getattr(self.trainer.model, "save_pretrained", None)
        if callable(save) and hasattr(self.trainer.model, "peft_config"):
            save(str(Path(path) / ADAPTER), safe_serialization=True)
        return Path(path)


@dataclass
class OffPolicyStep:
    """One update: the version it made, the sessions it used, what was dropped, the trainer's metrics."""

    version: int
    sessions: list[str]
    stale: int
    checkpoint: Path
    metrics: dict[str, Any]


class ProductionTrainer:
    """One deployment's off-policy updates over a ``Trainer`` (pure of HTTP: ``train_once`` is a step)."""

    def __init__(self, store: Store, trainer: Any, deployment: str, training: ProductionTrainingConfig) -> None:
        self.store = store
        self.trainer = trainer
        self.deployment = store.get_deployment(deployment)  # type: ignore[attr-defined]
        self.training = training
        self.baseline = RunningMean.replay(self.training.baseline_decay, store.trained_outcomes(deployment))
        self.stale_pending = 0  # dropped since the last step (reported with the next one)

    def next_version(self) -> int:
        recorded = [v.version for v in self.store.list_policy_versions(self.deployment.run_id)]
        return max([self.trainer.policy_version, *recorded]) + 1

    def ready(self) -> list[SessionWindow]:
        """Drop stale sessions (counted) and return the trainable ones, oldest window first."""
        name = self.deployment.name
        floor = min_served_version(self.trainer.policy_version, self.training.max_staleness)
        self.stale_pending += self.store.drop_stale_sessions(name, floor)
        return self.store.trainable_sessions(name, floor, limit=self.training.max_sessions)

    def train_once(self, run_dir: Path) -> OffPolicyStep | None:
        """One update when ``min_sessions`` sessions are ready; None otherwise."""
        sessions = self.ready()
        if len(sessions) < self.training.min_sessions:
            return None
        trainer, name = self.trainer, self.deployment.name
        batch = production_batch(self.store, sessions, trainer.config, self.baseline, self.training.group_by,
                                 trainer.policy_version, invert=self.training.invert_feedback)
        stale, self.stale_pending = self.stale_pending, 0
        batch.counts["sessions.stale_dropped"] += stale
        batch.counts["baseline.mean"] = self.baseline.baseline(list(batch.rewards.values()))  # type: ignore[assignment]
        metrics = trainer.step(batch)
        self.baseline.update(list(batch.rewards.values()))
        version = self.next_version()
        trainer.policy_version = version
        ckpt = save_checkpoint_atomic(_WithAdapter(trainer), run_dir, trainer.step_count)
        used = [s.id for s in sessions if s.rollout_id in batch.rewards]
        record_policy_version(self.store, version, ckpt, run_id=self.deployment.run_id, step=trainer.step_count,
                              metadata={"source": "production", "deployment": name, "sessions": len(used)})
        self.store.mark_sessions_trained(name, [s.id for s in sessions], version)
        return OffPolicyStep(version, used, stale, ckpt, metrics)

    def settle(self, stable: int | None) -> bool:
        """After the canary decided on our candidate: a rollback (the stable version is older than the
        trainer's) undoes that update; returns whether it did."""
        if stable is None or stable >= self.trainer.policy_version:
            return False
        self.restore(stable)
        return True

    def restore(self, version: int) -> None:
        """Go back to ``version``'s weights (a rolled-back candidate's update is undone). The trainer is at
        ``version`` again, so staleness counts from there; new numbers continue after the newest recorded
        version (``next_version``), so no number is reused."""
        trainer = self.trainer
        step = trainer.step_count
        path = next((v.checkpoint_path for v in self.store.list_policy_versions(self.deployment.run_id)
                     if v.version == version and v.checkpoint_path), None)
        if path is not None and (Path(path) / CHECKPOINT_STATE).is_file():
            trainer.load_checkpoint(path)
        elif path is not None:  # a version made elsewhere (an adapter folder given to the canary by hand)
            log.warning("deployment %s: version %d's weights at %s are not a trainer checkpoint: training "
                        "continues from the rolled-back weights", self.deployment.name, version, path)
        elif trainer.config.lora is not None:  # the base model: an adapter that adds nothing
            import torch

            with torch.no_grad():
                for n, p in trainer.model.named_parameters():
                    if "lora_B" in n:
                        p.zero_()
            trainer.optimizer.state.clear()
        else:
            log.warning("deployment %s: cannot go back to version %d (no checkpoint, full fine-tuning): "
                        "training continues from the rolled-back weights", self.deployment.name, version)
        trainer.step_count, trainer.policy_version = step, version


class CandidateSink:
    """Offers each update to the gateway's canary over its admin API, and reads the decision."""

    def __init__(self, gateway_url: str, admin_token: str, store: Store, deployment: str) -> None:
        self.client = httpx.AsyncClient(base_url=gateway_url.rstrip("/"), timeout=120.0,
                                        headers={"Authorization": f"Bearer {admin_token}"})
        self.store, self.deployment = store, deployment
        self.pending: int | None = None

    async def offer(self, version: int) -> bool:
        """Start ``version`` as the canary candidate; False when the gateway has no canary API."""
        r = await self.client.post(f"/admin/deployments/{self.deployment}/canary", json={"candidate_version": version})
        if r.status_code == 404 and "error" not in r.text:
            return False
        if r.status_code not in (200, 201):
            raise RuntimeError(f"the gateway refused candidate version {version} of {self.deployment!r}: HTTP "
                               f"{r.status_code} {r.text[:300]}")
        self.pending = version
        return True

    async def publish_directly(self, trainer: Any, version: int) -> None:
        """No canary API: serve ``version`` to every session (pause, publish, resume)."""
        await self._admin("/admin/pause", {"timeout_s": 600})
        try:
            trainer.policy_version = version - 1
            await asyncio.to_thread(trainer.publish)  # InProcessPublisher / folder: version becomes ``version``
            await self._admin("/admin/policy_version", {"version": version})
        finally:
            await self._admin("/admin/resume", {})

    async def _admin(self, path: str, body: dict[str, Any]) -> None:
        r = await self.client.post(path, json=body, timeout=None if path == "/admin/pause" else 60.0)
        if r.status_code != 200:
            raise RuntimeError(f"gateway admin call {path} failed ({r.status_code}): {r.text[:300]}")

    def decided(self) -> tuple[bool, int | None]:
        """Whether the pending candidate was decided, and the stable version then (None: no canary)."""
        if self.pending is None:
            return True, None
        state = canary_state(self.store, self.deployment)  # type: ignore[arg-type]
        if state.running and state.candidate_version == self.pending:
            return False, None
        self.pending = None
        return True, state.stable_version

    async def aclose(self) -> None:
        await self.client.aclose()
