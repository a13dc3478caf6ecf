"""The batch builders a run's mode hands the controller instead of RL's: rejection sampling (``[run] mode =
"rft"``) and on-policy distillation (``"distill"``). The driver picks one by mode (``drivers/rl.py``,
``batch_builder``); without one the controller builds its own (group advantages, success replay, one batch
per policy with ``[policies]``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from harnessrl.sft.config import DistillConfig
from harnessrl.sft.distill import Teacher, distill_batch, make_teacher
from harnessrl.sft.select import rft_batch
from harnessrl.store import Store
from harnessrl.training.config import SampleConfig
from harnessrl.training.train_batch import TrainBatch
from harnessrl.types import Rollout


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
