"""``RewardConfig``: where a rollout's reward comes from (the ``[rewards]`` section of the TOML config).

Four sources, combinable: rewards the harness posted to its reward URL, a mapping of the harness's
exit code, a verifier command run in the attempt's directory after the harness exits, and a model judge
(``[rewards.judge]``, ``judge.py``). The default (``combine = "auto"``) takes the verifier if one is
configured, else the judge, else what the harness posted, else the exit code mapping; ``weighted`` sums
them by ``weights``. Whatever the mode, a tampered protected file gives 0. With a verifier or a judge, what
the harness posted is recorded but not trained unless ``posted = "train"`` (see ``posted.py``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from harnessrl.config_base import ConfigSection
from harnessrl.runners.config import DEFAULT_INHERIT_ENV

CombineMode = Literal["auto", "verifier", "judge", "harness", "exit_code", "sum", "mean", "min", "max",
                      "weighted"]
#: Reward sources ``weights`` may name.
SOURCES = ("verifier", "judge", "harness", "exit_code")


class JudgeConfig(ConfigSection):
    """A model grader (``[rewards.judge]``): it reads the task, a rubric and the recorded transcript and
    answers a score in [0, 1] with a short reason. Its calls are recorded as judge calls of the rollout and
    never trained. docs/judges.md says how to point it at vLLM or OpenAI and how to check it agrees."""

    url: str = Field(
        ...,
        description='Base URL of an OpenAI-compatible endpoint (".../v1"), or "policy": the run\'s own engine '
        "(tests and small setups; the judge then drifts as the policy trains).",
    )
    model: str | None = Field(
        None, description="Model name sent to the endpoint; None: the first model its /v1/models lists."
    )
    api_key_env: str | None = Field(
        None, description="Environment variable holding the endpoint's API key (never the key itself)."
    )
    mode: Literal["pointwise", "group"] = Field(
        "pointwise",
        description="`pointwise`: one call per attempt. `group`: one call scores all attempts of a group "
        "relative to each other (as RULER does: cheaper, better calibrated for GRPO).",
    )
    rubric: str | None = Field(
        None, description="The rubric of every task; a task's own `rubric` field (in its JSONL line) wins."
    )
    rubric_file: str | None = Field(None, description="Read the run's rubric from this file instead.")
    max_transcript_chars: int = Field(
        12000, ge=200, description="Longest transcript shown per attempt; longer ones lose their middle turns."
    )
    max_turn_chars: int = Field(
        3000, ge=100, description="Longest single turn; a longer one keeps its head and tail."
    )
    include_stdout: bool = Field(
        True, description="Show the tail of the harness's stdout after the conversation (its final answer)."
    )
    score_regex: str | None = Field(
        None,
        description="Parse the answer with this regex (a named group `score`, optionally `reason`) instead "
        "of the JSON object {\"score\": ..., \"reason\": ...}. Group mode needs JSON.",
    )
    json_schema: bool = Field(
        True, description="Ask the endpoint for JSON matching the answer's schema (response_format)."
    )
    retries: int = Field(2, ge=0, description="New tries after an unparseable answer or a failed request.")
    timeout_s: float = Field(120.0, gt=0, description="Per request.")
    max_tokens: int = Field(1024, ge=16, description="Completion budget of one judge answer.")
    temperature: float = Field(0.0, ge=0.0)
    concurrency: int = Field(4, ge=1, description="Judge requests in flight at once, for the whole run.")
    cache: bool = Field(
        True, description="Reuse a score recorded for the same (model, mode, rubric, task, transcripts)."
    )

    @model_validator(mode="after")
    def _checks(self) -> JudgeConfig:
        if self.score_regex is not None:
            try:
                pattern = re.compile(self.score_regex)
            except re.error as exc:
                raise ValueError(f"[rewards.judge] score_regex does not compile: {exc}") from None
            if "score" not in pattern.groupindex:
                raise ValueError("[rewards.judge] score_regex needs a named group, e.g. (?P<score>[0-9.]+)")
            if self.mode == "group":
                raise ValueError('[rewards.judge] score_regex works in mode = "pointwise"; group mode '
                                 "answers JSON (one score per attempt)")
        if self.rubric is not None and self.rubric_file is not None:
            raise ValueError("[rewards.judge] set rubric or rubric_file, not both")
        return self


class RewardConfig(ConfigSection):
    """How an attempt is scored once its harness has exited."""

    combine: CombineMode = Field(
        "auto",
        description="`auto`: verifier if configured, else judge, else harness-posted, else exit code. A "
        "source name takes that source only. `sum`/`mean`/`min`/`max` combine every enabled source (a "
        "missing one counts as `missing_reward`). `weighted`: final = sum of weights[name] x source.",
    )
    weights: dict[str, float] = Field(
        default_factory=dict,
        description="combine = \"weighted\": weight per source name (verifier, judge, harness, exit_code), "
        "e.g. {verifier = 0.5, judge = 0.5}. Every component is still recorded under its own name.",
    )
    judge: JudgeConfig | None = Field(None, description="A model grader ([rewards.judge]); None: off.")
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

    @model_validator(mode="after")
    def _weights(self) -> RewardConfig:
        unknown = sorted(set(self.weights) - set(SOURCES))
        if unknown:
            raise ValueError(f"[rewards] weights name unknown sources {unknown}; known: {list(SOURCES)}")
        if self.combine == "weighted" and not self.weights:
            raise ValueError('[rewards] combine = "weighted" needs weights, e.g. weights = {verifier = 0.5, '
                             "judge = 0.5}")
        if self.weights and self.combine != "weighted":
            raise ValueError('[rewards] weights are used with combine = "weighted" only')
        if (self.combine == "judge" or "judge" in self.weights) and self.judge is None:
            raise ValueError("[rewards] combine uses the judge, but there is no [rewards.judge] section")
        if self.combine == "auto" and self.judge is not None and self.verifier:
            raise ValueError('[rewards] has a verifier and a judge: say how they combine, e.g. combine = "weighted" '
                             'with weights = {verifier = 0.5, judge = 0.5} (auto would take the verifier and pay the '
                             "judge for nothing)")
        return self
