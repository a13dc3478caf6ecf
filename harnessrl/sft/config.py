"""The ``[sft]`` section: which recorded rollouts ``harnessrl sft`` trains on, and for how long; and the
``[distill]`` section: the teacher of ``[run] mode = "distill"``.

``[sft]`` also sets the reward threshold of ``[run] mode = "rft"`` (``min_reward``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection
from harnessrl.types import RolloutStatus


class SftConfig(ConfigSection):
    """A query over the store plus the length of training (docs/sft.md)."""

    store: str | None = Field(
        None, description="Store URL to read rollouts from; None: this config's store ([store] url or the run "
        "directory's store.db). SFT's own run is always recorded in this config's store.",
    )
    runs: list[str] = Field(
        default_factory=list, description="Run ids to take rollouts from (empty: every run in the store except "
        "SFT's own).",
    )
    split: Literal["train", "eval", "any"] = Field(
        "train", description="Task split of the rollouts (held-out rollouts are not trained on unless 'eval'/'any').",
    )
    min_reward: float | None = Field(
        None, description="Keep rollouts whose outcome reward is >= this (None: any reward, or none). Also the "
        "threshold of [run] mode = \"rft\" (None there means 1.0).",
    )
    status: list[RolloutStatus] = Field(
        default_factory=lambda: [RolloutStatus.SUCCEEDED], description="Rollout statuses to keep.",
    )
    min_policy_version: int | None = Field(None, ge=0, description="Oldest policy version (at launch) to keep.")
    max_policy_version: int | None = Field(None, ge=0, description="Newest policy version (at launch) to keep.")
    best_k: int | None = Field(
        None, ge=1, description="Per task, keep only the k highest-reward rollouts (ties: the earliest).",
    )
    include_retokenized: bool = Field(
        True, description="Train samples re-tokenized from text (imported conversations, a teacher's traces).",
    )
    steps: int = Field(20, ge=0, description="Optimizer steps (each over rollouts_per_step rollouts).")
    rollouts_per_step: int = Field(16, ge=1, description="Rollouts per step (a seeded shuffle, epoch after epoch).")


class DistillConfig(ConfigSection):
    """The ``[distill]`` section: where the teacher is."""

    teacher: str | None = Field(None, description="Model spec or model folder of an in-process teacher.")
    teacher_url: str | None = Field(
        None, description="Base URL (ending in /v1) of a vLLM server serving the teacher (prompt_logprobs)."
    )
    teacher_model: str | None = Field(None, description="Model name to ask teacher_url for (default: its first).")
