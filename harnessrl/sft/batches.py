"""The batch builders a run's mode hands the controller instead of RL's: rejection sampling (``[run] mode =
"rft"``) and on-policy distillation (``"distill"``). ``batch_builder`` picks one for a config; ``None`` leaves
the controller its own (group advantages, success replay, one batch per policy with ``[policies]``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from harnessrl.sft.config import DistillConfig
from harnessrl.sft.distill import Teacher, distill_batch, make_teacher
from harnessrl.sft.select import rft_batch
from harnessrl.store import Store
from harnessrl.training.config import SampleConfig
from harnessrl.training.train_batch import TrainBatch
from harnessrl.types import Rollout

if TYPE_CHECKING:
    from harnessrl.config import HarnessConfig
    from harnessrl.controller import BatchBuilder


class RftBatches:
    """A step's scored attempts at or above ``threshold``, trained with the SFT loss (``rft_batch``)."""

    objective: Literal["policy_gradient", "sft"] = "sft"

    def __init__(self, threshold: float, samples: SampleConfig) -> None:
        self.threshold, self.samples = threshold, samples

    def __call__(self, store: Store, rollouts: Sequence[Rollout]) -> TrainBatch:
        return rft_batch(store, rollouts, self.threshold, self.samples)


class DistillBatches:
    """Per-token reverse KL to the teacher (``distill_batch``); the teacher is made at the first step."""

    objective: Literal["policy_gradient", "sft"] = "policy_gradient"

    def __init__(self, config: DistillConfig, samples: SampleConfig) -> None:
        self.config, self.samples = config, samples
        self.teacher: Teacher | None = None

    def __call__(self, store: Store, rollouts: Sequence[Rollout]) -> TrainBatch:
        if self.teacher is None:
            self.teacher = make_teacher(self.config)
        return distill_batch(store, rollouts, self.teacher, self.samples)


def batch_builder(config: HarnessConfig) -> BatchBuilder | None:
    """The builder ``[run] mode`` asks for. With ``[policies]`` distillation keeps the per-policy batches
    (one batch each, as before this seam existed); rejection sampling replaces them."""
    if config.run.mode == "rft":
        threshold = 1.0 if config.sft.min_reward is None else config.sft.min_reward
        return RftBatches(threshold, config.training.samples)
    if config.run.mode == "distill" and not config.policies:
        return DistillBatches(config.distill, config.training.samples)
    return None
