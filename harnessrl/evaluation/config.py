"""``[eval]``: what ``harnessrl eval`` runs (checkpoints x harnesses x k attempts) and how it reads them.

The harnesses are the config's ``[harnesses.<name>]`` sections (``harnessrl/config.py`` validates each as
``[runner]`` with its keys replaced); a config without any evaluates its ``[runner]`` under the name
``default``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection

#: The checkpoint name that means the engine's model as configured, untrained.
BASE = "base"
#: The harness name of ``[runner]`` when the config has no ``[harnesses.<name>]`` section.
DEFAULT_HARNESS = "default"


class EvalConfig(ConfigSection):
    """``[eval]``."""

    checkpoints: list[str] = Field(
        default_factory=lambda: [BASE], min_length=1,
        description='The policies to evaluate: "base" (the [engine] model) or a checkpoint folder '
        "(runs/x/checkpoints/step_N, relative to the config file). `--checkpoint` replaces the list.")
    harnesses: list[str] = Field(
        default_factory=list,
        description="Which [harnesses.<name>] sections to run (empty: all of them; none defined: [runner], "
        'named "default"). `--harness` replaces the list.')
    attempts: int = Field(4, ge=1, le=1000, description="Attempts per task and cell: the n of pass@k.")
    k: int | None = Field(None, ge=1, description="The k of pass@k (default: attempts). pass@1 is always "
                          "reported.")
    tasks: int | None = Field(None, ge=1, description="Evaluate the first N tasks of the split (None: all).")
    split: Literal["eval", "train"] = Field("eval", description="Which [tasks] file to evaluate on.")
    temperature: float | None = Field(
        None, ge=0.0, description="Sampling temperature of every attempt (None: [run] eval_temperature, else "
        "the engine's default). At 0 every attempt of a task is the same and pass@k says nothing pass@1 does not.")
    infra_retries: int = Field(
        2, ge=0, le=100, description="Attempts that ended as infra (the harness or machine failed, not the "
        "task) are run again, at most this many times per task and cell; a task left with none scored is "
        "reported as unscored, never as 0.")
    resamples: int = Field(2000, ge=100, le=100_000, description="Bootstrap resamples of the tasks per interval.")
    level: float = Field(0.95, gt=0.5, lt=1.0, description="The intervals' confidence level.")
