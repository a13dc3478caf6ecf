"""``RunnerConfig``: where and how attempts run (the ``[runner]`` section of the TOML config).

Kept apart from the code that reads it so that the config file documents the design: every knob the
runner has is here, with a default that works on a laptop. There are no hidden caps elsewhere.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: Variables copied from the controller's environment into every attempt. Nothing else is inherited, so
#: the user's own ``OPENAI_API_KEY`` (or any other secret) can never reach a harness by accident.
DEFAULT_INHERIT_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "HF_HOME",
    "HF_HUB_OFFLINE",
)

#: Defaults that keep common harnesses offline and their logs useful (see DESIGN.md, "real harnesses").
DEFAULT_ATTEMPT_ENV: dict[str, str] = {
    "PYTHONUNBUFFERED": "1",  # a killed harness still leaves its last lines in the captured tail
    "OPENAI_AGENTS_DISABLE_TRACING": "1",  # openai-agents posts traces to the internet otherwise
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches a cost map from the internet at import
}


class RunnerConfig(BaseModel):
    """How attempts are launched, bounded and observed."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "kubernetes"] = Field(
        "local",
        description="`local`: one subprocess per attempt on this machine. `kubernetes`: one Job each.",
    )
    command: list[str] = Field(
        default_factory=lambda: ["python", "agent.py"],
        description="The harness command, run unmodified in the attempt's working directory (its cwd). "
        "Relative paths in it are relative to that directory, so give absolute paths for scripts that "
        "live outside the task workspace.",
        min_length=1,
    )
    concurrency: int = Field(4, ge=1, description="Attempts running at the same time (the only cap).")
    timeout_s: float = Field(
        600.0, gt=0, description="Wall-clock limit per attempt, counted from process start (not queueing)."
    )
    kill_grace_s: float = Field(
        5.0, ge=0, description="After SIGTERM to the attempt's process group, wait this long, then SIGKILL."
    )
    max_log_bytes: int = Field(
        65536,
        ge=0,
        description="Bytes of stdout and of stderr kept per attempt (the tail; the rest is counted).",
    )
    workdir_root: str = Field(
        "attempts",
        description="Where attempt directories are created; relative paths are relative to the run directory.",
    )
    keep_workdirs: Literal["all", "failed", "none"] = Field(
        "failed", description="Which attempt directories survive `Runner.release` (after scoring)."
    )
    env: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_ATTEMPT_ENV),
        description="Extra environment for every attempt. Rollout identity variables (OPENAI_*, "
        "ANTHROPIC_*, HARNESSRL_*) always win over these.",
    )
    inherit_env: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INHERIT_ENV),
        description="Names copied from the controller's environment when set; nothing else is inherited.",
    )
    prepend_python_bin: bool = Field(
        True,
        description="Put the directory of the running Python (the venv's bin) first on PATH, so that "
        "`python` in the command is the interpreter harnessrl runs in.",
    )
    task_input_env: bool = Field(
        True,
        description="Pass the task input as HARNESSRL_TASK_INPUT (JSON) and HARNESSRL_TASK_<KEY> variables.",
    )
    task_input_file: bool = Field(
        True,
        description="Write the task input to a JSON file outside the workspace; path in HARNESSRL_TASK_INPUT_FILE.",
    )
    max_env_value_bytes: int = Field(
        32768,
        ge=0,
        description="Task input values longer than this are left out of the environment (the kernel refuses "
        "exec with huge variables); the JSON file always has them.",
    )
