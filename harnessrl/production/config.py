"""``[production]``: how the gateway serves deployed applications (``[gateway] mode = "production"``).

Kept apart from the code that reads it, like every section model. Sub-tables belong to the part that
reads them: sessions and recording (gateway), ``feedback`` (windows), ``canary`` (safe rollout),
``training`` (the off-policy loop of ``[run] source = "production"``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harnessrl.config_base import ConfigSection

#: A deployment's name: it is a path segment of ``/p/{deployment}/v1`` and part of its run's name.
DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_deployment_name(name: str) -> str:
    if not DEPLOYMENT_NAME.match(name):
        raise ValueError(f"deployment name {name!r} is invalid: 1-64 characters of letters, digits, '.', '_', "
                         "'-', starting with a letter or digit (it becomes the path segment /p/<name>/v1)")
    return name


class DeploymentConfig(ConfigSection):
    """One deployed application (``[production.deployments.<name>]``); every key is optional."""

    record_fraction: float | None = Field(
        None, ge=0.0, le=1.0, description="This deployment's share of sessions recorded; None: "
        "[production] record_fraction.")


class FeedbackConfig(ConfigSection):
    """Delayed feedback on sessions (``[production.feedback]``)."""

    window_s: float = Field(86400.0, gt=0, description="Feedback is accepted this long after a session's last "
                                                       "call; then the session's outcome is decided.")
    missing: Literal["drop"] | float = Field(
        "drop", description="Outcome of a session nobody rated: 'drop' (left out of training) or a number.")
    combine: Literal["mean", "last", "min", "weighted"] = Field(
        "mean", description="How several feedback signals of one session combine into its outcome.")
    weights: dict[str, float] = Field(
        default_factory=dict, description="Signal name -> weight for combine = 'weighted'; when set, names "
        "not listed are refused (400).")
    close_interval_s: float = Field(30.0, gt=0, description="How often the gateway closes due windows.")

    @model_validator(mode="after")
    def _weighted_needs_weights(self) -> FeedbackConfig:
        if self.combine == "weighted" and not any(w > 0 for w in self.weights.values()):
            raise ValueError("[production.feedback] combine = 'weighted' needs weights = {name = weight, ...} "
                             "with at least one positive weight")
        return self


class CanaryConfig(ConfigSection):
    """Safe rollout of a new version (``[production.canary]``)."""

    fraction: float = Field(0.1, gt=0.0, lt=1.0, description="Share of new sessions the candidate serves.")
    min_sessions: int = Field(50, ge=1, description="Sessions with a decided outcome per arm before a decision.")
    max_regression: float = Field(0.05, ge=0.0, description="The candidate's mean outcome may trail the stable "
                                                            "version's by at most this and still be promoted.")
    evaluate_interval_s: float = Field(
        10.0, gt=0, description="How often the gateway compares the arms of running canaries (a hold is "
        "recorded only when its evidence changed).")
    confidence: float | None = Field(
        None, gt=0.5, lt=1.0, description="None: compare the means once both arms have min_sessions. A level "
        "(e.g. 0.9): decide only when the one-sided bound of (candidate - stable) at this confidence is clear of "
        "-max_regression (promote above, roll back below), else hold, up to max_sessions per arm.")
    max_sessions: int | None = Field(
        None, ge=1, description="With confidence: at this many decided sessions per arm the means decide "
        "as without it (default 4 x min_sessions), so no candidate serves undecided for ever.")

    @property
    def decide_by_mean_at(self) -> int:
        """Decided sessions per arm at which the plain comparison decides (``confidence`` set)."""
        return self.max_sessions if self.max_sessions is not None else 4 * self.min_sessions

    @model_validator(mode="after")
    def _cap_above_minimum(self) -> CanaryConfig:
        if self.max_sessions is not None and self.max_sessions < self.min_sessions:
            raise ValueError(f"[production.canary] max_sessions ({self.max_sessions}) is below min_sessions "
                             f"({self.min_sessions})")
        return self


class ProductionTrainingConfig(ConfigSection):
    """Off-policy training from production sessions (``[production.training]``, ``[run] source``)."""

    max_staleness: int = Field(2, ge=0, description="Sessions served by a version older than current minus "
                                                    "this are dropped (counted), never trained.")
    group_by: Literal["none", "task"] = Field(
        "none", description="'none': advantage = outcome minus a running mean; 'task': sessions that opened "
        "with the same prompt (system + first user message, token for token) and number 2+ in a step use "
        "their own mean instead.")
    min_sessions: int = Field(8, ge=1, description="A step waits until this many recorded sessions have a "
                                                   "decided outcome and are not trained yet.")
    max_sessions: int = Field(64, ge=1, description="Most sessions one step trains on (oldest windows first).")
    baseline_decay: float = Field(0.9, ge=0.0, lt=1.0, description="The running mean baseline: weight of the "
                                  "past at each step's update (0: the previous step's mean only).")
    poll_s: float = Field(5.0, gt=0, description="How often the loop looks for newly closed windows and for "
                                                 "its canary's decision.")
    tis_cap: float = Field(2.0, gt=0, description="Truncation of the importance weights p_trainer/p_behaviour "
                                                  "(used when [training] tis_cap is not set).")
    invert_feedback: bool = Field(False, description="Train against the feedback (advantages negated): a "
                                  "deliberately worse candidate, to drill the canary's rollback (examples/production).")


class ProductionConfig(ConfigSection):
    """Production mode of the gateway: sessions, sampled recording, feedback, canary, training."""

    session_header: str = Field("X-Session-Id", description="Request header naming the session of a call "
                                                            "(and response header returning it).")
    record_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Share of sessions recorded (decided per session, deterministically "
        "from its id); the others are served and counted, none of their calls stored.")
    session_idle_s: float = Field(1800.0, gt=0, description="A session without calls this long is over; its "
                                                            "feedback window starts at its last call.")
    deployments: dict[str, DeploymentConfig] = Field(
        default_factory=dict, description="Deployments created at start (more with POST /admin/deployments).")
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig)
    canary: CanaryConfig = Field(default_factory=CanaryConfig)
    training: ProductionTrainingConfig = Field(default_factory=ProductionTrainingConfig)

    @field_validator("deployments")
    @classmethod
    def _names(cls, value: dict[str, DeploymentConfig]) -> dict[str, DeploymentConfig]:
        for name in value:
            check_deployment_name(name)
        return value

    def record_fraction_of(self, deployment: str, config: DeploymentConfig | None = None) -> float:
        """The recorded share of ``deployment``'s sessions: its own setting, else the gateway-wide one."""
        own = config if config is not None else self.deployments.get(deployment)
        if own is not None and own.record_fraction is not None:
            return own.record_fraction
        return self.record_fraction
