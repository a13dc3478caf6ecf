"""``RewardConfig``: where a rollout's reward comes from (the ``[rewards]`` section of the TOML config).

Three sources, combinable: rewards the harness posted to its reward URL, a mapping of the harness's
exit code, and a verifier command run in the attempt's directory after the harness exits. The
default (``combine = "auto"``) takes the verifier if one is configured, else what the harness posted,
else the exit code mapping. Whatever the mode, a tampered protected file gives 0. With a verifier, what the
harness posted is recorded but not trained unless ``posted = "train"`` (see ``posted.py``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harnessrl.runners.config import DEFAULT_INHERIT_ENV

CombineMode = Literal["auto", "verifier", "harness", "exit_code", "sum", "mean", "min", "max"]


class RewardConfig(BaseModel):
    """How an attempt is scored once its harness has exited."""

    model_config = ConfigDict(extra="forbid")

    combine: CombineMode = Field(
        "auto",
        description="`auto`: verifier if configured, else harness-posted, else exit code. A source name "
        "takes that source only. `sum`/`mean`/`min`/`max` combine every enabled source (a missing one "
        "counts as `missing_reward`).",
    )
    harness: bool = Field(True, description="Use the rewards the harness posted to HARNESSRL_REWARD_URL.")
    posted: Literal["auto", "train", "record"] = Field(
        "auto",
        description="What becomes of rewards the harness posts (any tool it runs can post too): `record` "
        "keeps them in the store and on the dashboard without training on them; `train` trains them like "
        "any source; `auto` (default): `record` when a verifier decides the rollout, else `train`.",
    )
    harness_names: list[str] | None = Field(
        None,
        description="Which posted reward names count (None: all). Per name the last posted value counts; "
        "names are summed. Per-call rewards (with a call index) are not part of the rollout's scalar.",
    )
    exit_code_map: dict[int, float] = Field(
        default_factory=dict,
        description="Reward per harness exit code, e.g. {0 = 1.0}; empty (default) turns this source off.",
    )
    exit_code_default: float = Field(0.0, description="Reward for exit codes not in the map (and timeouts).")
    verifier: list[str] | None = Field(
        None,
        description="Command run in the attempt's working directory after the harness exits (a task's own "
        "`verifier` overrides it). It must exit 0 and print the reward as the last line of stdout.",
    )
    verifier_timeout_s: float = Field(60.0, gt=0, description="Wall-clock limit for the verifier.")
    verifier_kill_grace_s: float = Field(2.0, ge=0, description="SIGTERM-to-SIGKILL grace for the verifier.")
    verifier_max_log_bytes: int = Field(16384, ge=0, description="Verifier output kept (tail), per stream.")
    verifier_env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the verifier."
    )
    verifier_inherit_env: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INHERIT_ENV),
        description="Names copied from the controller's environment into the verifier's.",
    )
    verifier_failure_reward: float | None = Field(
        None,
        description="Reward when the verifier crashes, times out or prints no number. None (default): the "
        "rollout is an infra failure and gets no reward (the agent is not punished for a broken verifier).",
    )
    hidden_subdir: str = Field(
        "",
        description="Where a task's hidden_dir is copied in the workspace after the harness exits ('' = root).",
    )
    protected: list[str] = Field(
        default_factory=list,
        description="Globs (relative to the workspace) checksummed before launch and checked after exit, "
        "added to each task's own; any change, deletion or new match is tampering: reward 0.",
    )
    missing_reward: float | None = Field(
        0.0,
        description="Reward when the chosen source gave nothing (e.g. the harness crashed before posting). "
        "None: treat as an infra failure instead.",
    )
    timed_out_reward: float | None = Field(
        None, description="Fixed reward for a timed-out attempt; None (default) scores it like any other."
    )
