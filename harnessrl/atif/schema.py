"""The ATIF schema (Harbor's Agent Trajectory Interchange Format, RFC 0001) as pydantic models.

Written from the RFC's field tables (``docs/rfcs/0001-trajectory-format.md`` in laude-institute/harbor), not
imported from Harbor: Harbor needs Python 3.12 and brings its whole evaluation framework. The models cover
every field up to ATIF-v1.7, so a file any v1.x producer wrote validates; like Harbor's own models they
forbid unknown fields and check what its validators check (step ids 1..n, agent-only fields on agent steps,
observation results naming a tool call of their step). ``harnessrl export --format atif`` writes
``WRITTEN_VERSION`` and only fields that version has.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: What the export writes: every field it uses exists in v1.6 (token IDs since v1.3/v1.4, tool definitions
#: since v1.5), and v1.6 is accepted by Harbor releases that predate v1.7 (their version is a closed list).
WRITTEN_VERSION = "ATIF-v1.6"
#: What an import reads. A version outside this list is refused rather than guessed at.
READ_VERSIONS = ("ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6",
                 "ATIF-v1.7")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageSource(_Strict):
    """An image stored next to the trajectory (v1.6), referenced by path."""

    media_type: str
    path: str


class ContentPart(_Strict):
    """One part of a multimodal message or observation (v1.6): text, or an image."""

    type: Literal["text", "image"]
    text: str | None = None
    source: ImageSource | dict[str, Any] | None = None


class ToolCall(_Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None  # v1.7


class SubagentTrajectoryRef(_Strict):
    session_id: str | None = None  # required before v1.7
    trajectory_id: str | None = None  # v1.7
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None


class ObservationResult(_Strict):
    source_call_id: str | None = None
    content: str | list[ContentPart] | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None  # v1.7


class Observation(_Strict):
    results: list[ObservationResult]


class Metrics(_Strict):
    """One step's LLM data: counts, and for RL the exact token IDs and the completion's logprobs."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None  # v1.4
    completion_token_ids: list[int] | None = None  # v1.3
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Strict):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = None
    extra: dict[str, Any] | None = None


class Agent(_Strict):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None  # v1.5
    extra: dict[str, Any] | None = None


_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(_Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[ContentPart]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    llm_call_count: int | None = Field(None, ge=0)  # v1.7
    is_copied_context: bool | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_fields_on_agent_steps(self) -> Step:
        if self.source != "agent":
            for name in _AGENT_ONLY:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is only allowed on agent steps (this step's source is {self.source!r})")
        return self


class Trajectory(_Strict):
    schema_version: Literal["ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5",
                            "ATIF-v1.6", "ATIF-v1.7"]
    session_id: str | None = None  # required before v1.7 (checked below)
    trajectory_id: str | None = None  # v1.7
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[Trajectory] | None = None  # v1.7

    @model_validator(mode="after")
    def _ids_and_references(self) -> Trajectory:
        if self.session_id is None and self.schema_version != "ATIF-v1.7":
            raise ValueError(f"session_id is required in {self.schema_version} (optional from ATIF-v1.7)")
        for i, step in enumerate(self.steps):
            if step.step_id != i + 1:
                raise ValueError(f"steps[{i}].step_id is {step.step_id}: step ids run 1, 2, 3, ... in order")
            calls = {c.tool_call_id for c in step.tool_calls or ()}
            for r in step.observation.results if step.observation else ():
                if r.source_call_id is not None and r.source_call_id not in calls:
                    raise ValueError(f"steps[{i}].observation names source_call_id {r.source_call_id!r}, "
                                     "which is not a tool_call_id of that step")
        return self
