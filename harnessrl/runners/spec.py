"""What an attempt is asked to do (``AttemptSpec``) and what came of it (``AttemptResult``).

Failure policy (one place, applied by every runner):

========================================  ==============  ============  ===================================
what happened                             status          failure kind  why
========================================  ==============  ============  ===================================
harness exited 0                          ``succeeded``   —             reward decides how good it was
harness exited non-zero / died of signal  ``failed``      ``agent``     the harness's doing; reward is kept
harness ran past ``timeout_s``            ``timed_out``   ``agent``     the group was killed; reward is kept
workspace copy / process start failed     ``failed``      ``infra``     never the agent's fault: excluded
runner error while watching               ``failed``      ``infra``     idem
cancelled by the controller               ``cancelled``   ``infra``     the controller's decision: excluded
========================================  ==============  ============  ===================================

``infra`` rollouts never receive a reward (see ``harnessrl.rewards``), so a broken machine cannot teach
the policy anything.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harnessrl.environments.grade import Grade
from harnessrl.environments.task_env import ContainerTests, TaskEnvironment
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.sandbox import Sandbox
from harnessrl.types import FailureKind, RolloutStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TaskAssets:
    """What a task brings besides its agent-visible input (all optional; paths on the controller's disk).

    ``workspace`` is copied fresh into every attempt's working directory. ``hidden_dir`` (hidden tests)
    is copied into that directory only after the harness has exited, and ``verifier_input`` (reference
    answers) is only ever given to the verifier. ``protected`` globs (relative to the workspace) are
    checksummed before launch and checked after exit. ``verifier`` overrides the config's verifier, and
    ``rubric`` the judge's (``[rewards.judge]``); the harness sees neither. ``timeout_s`` is this task's
    harness timeout where it asks for its own (a Harbor task's ``[agent] timeout_sec``, a record's
    ``timeout_s``), in place of ``[runner] timeout_s``.
    """

    workspace: Path | None = None
    hidden_dir: Path | None = None
    verifier_input: Mapping[str, Any] | None = None
    protected: tuple[str, ...] = ()
    verifier: tuple[str, ...] | None = None
    rubric: str | None = None
    timeout_s: float | None = None
    #: The container the task runs in (its image, limits, in-container tests); None: the host, as before.
    environment: TaskEnvironment | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], base_dir: Path | str = ".") -> TaskAssets:
        """Read the optional keys of a task record (a JSONL line); relative paths are from ``base_dir``."""
        base = Path(base_dir)

        def path(key: str) -> Path | None:
            value = record.get(key)
            return None if value in (None, "") else (base / str(value)).resolve()

        verifier = record.get("verifier")
        if isinstance(verifier, str):
            raise ValueError('task \'verifier\' must be a list of arguments, e.g. ["python", "check.py"]')
        timeout = record.get("timeout_s")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise ValueError(f"task 'timeout_s' must be a number of seconds > 0, not {timeout!r}")
        return cls(
            environment=_record_environment(record, base),
            workspace=path("workspace"),
            hidden_dir=path("hidden_dir"),
            verifier_input=record.get("verifier_input"),
            protected=tuple(record.get("protected") or ()),
            verifier=tuple(verifier) if verifier else None,
            rubric=str(record["rubric"]) if record.get("rubric") else None,
            timeout_s=float(timeout) if timeout is not None else None,
        )


def _record_environment(record: Mapping[str, Any], base: Path) -> TaskEnvironment | None:
    """A JSONL record's container: ``image`` (a name) or ``dockerfile_dir`` (a folder to build), with
    ``tests`` (a folder holding ``test.sh``, copied to /tests after the harness) graded as Harbor grades."""
    image, build = record.get("image"), record.get("dockerfile_dir")
    if image is None and build is None:
        if record.get("tests"):
            raise ValueError("task 'tests' are run in the task's container: give it an 'image' or 'dockerfile_dir'")
        return None
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise ValueError(f"task 'image' must be an image name, not {image!r}")
    if record.get("verifier"):
        raise ValueError("a task with an 'image' is graded in its container: give 'tests' (a folder whose test.sh "
                         "writes /logs/verifier/reward.txt) instead of a host 'verifier' command")
    tests = None
    if record.get("tests"):
        folder = (base / str(record["tests"])).resolve()
        if not (folder / "test.sh").is_file():
            raise ValueError(f"task 'tests' = {folder} has no test.sh")
        tests = ContainerTests(tests_dir=folder)
    return TaskEnvironment(
        name=str(record.get("id", "task")),
        image=image,
        build_context=(base / str(build)).resolve() if build is not None else None,
        workdir=record.get("workdir"),
        tests=tests,
    )


@dataclass(frozen=True, slots=True)
class AttemptSpec:
    """Everything a runner needs to run one attempt. Build it with ``make_attempt_spec``.

    ``env`` holds the rollout's identity (gateway URLs and its scoped API key): it is kept out of
    ``repr`` so that the key never reaches a log line.
    """

    rollout_id: str
    task_id: str
    task_input: Mapping[str, Any]
    command: tuple[str, ...]
    timeout_s: float
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    assets: TaskAssets = field(default_factory=TaskAssets)
    protected: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """The outcome of one attempt as the runner saw it (rewards are computed afterwards).

    ``stdout``/``stderr`` are the last ``max_log_bytes`` of each stream; ``*_bytes`` count everything
    the harness wrote. ``workdir`` is the harness's cwd, kept until ``Runner.release``.
    ``protected_sha256`` maps each protected file (relative path) to its digest before launch.
    """

    rollout_id: str
    status: RolloutStatus
    failure_kind: FailureKind | None
    reason: str | None
    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float
    attempt_dir: Path | None
    workdir: Path | None
    handle: str | None = None
    protected_sha256: Mapping[str, str] = field(default_factory=dict)
    #: The sandbox the harness ran in; the verifier runs in the same one (None: unsandboxed).
    sandbox: Sandbox | None = None
    #: The attempt's container, still there until ``Runner.release``: the task's tests run in it (or in a
    #: fresh one, clean grading). None: the attempt did not run in a local container.
    box: Any = None
    #: A grade the runner already has (a Kubernetes pod's verifier container ran the tests after the
    #: harness): scoring records it as the ``verifier`` reward instead of running a verifier itself.
    graded: Grade | None = None

    def logs(self) -> str:
        """Both tails in one text, as stored with the rollout."""
        return (
            f"--- stdout ({self.stdout_bytes} bytes) ---\n{self.stdout}\n"
            f"--- stderr ({self.stderr_bytes} bytes) ---\n{self.stderr}\n"
        )


_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def make_attempt_spec(
    config: RunnerConfig,
    *,
    rollout_id: str,
    task_id: str,
    task_input: Mapping[str, Any],
    gateway_url: str,
    api_key: str,
    assets: TaskAssets | None = None,
    protected: tuple[str, ...] | list[str] = (),
    model: str | None = None,
) -> AttemptSpec:
    """The spec for one rollout: its identity in the environment, the command and timeout from config.

    ``gateway_url`` is the gateway's root (``http://127.0.0.1:8000``); the harness gets its rollout's
    routes: ``OPENAI_BASE_URL=<gw>/r/<id>/v1``, ``ANTHROPIC_BASE_URL=<gw>/r/<id>`` (no ``/v1``: the
    Anthropic client appends ``/v1/messages``), ``GOOGLE_GEMINI_BASE_URL=<gw>/r/<id>`` (Gemini's clients
    append ``/v1beta/models/...``) and ``HARNESSRL_REWARD_URL=<gw>/r/<id>/reward``.
    ``protected`` adds globs (e.g. the reward config's) to the task's own.
    """
    if not _SAFE_ID.match(rollout_id):
        raise ValueError(f"rollout id {rollout_id!r} must match {_SAFE_ID.pattern} (it names a directory)")
    assets = assets or TaskAssets()
    root = f"{gateway_url.rstrip('/')}/r/{quote(rollout_id, safe='')}"
    env = {
        "OPENAI_BASE_URL": f"{root}/v1",
        "OPENAI_API_KEY": api_key,
        "ANTHROPIC_BASE_URL": root,
        "ANTHROPIC_API_KEY": api_key,
        "GOOGLE_GEMINI_BASE_URL": root,  # the Gemini CLI and google-genai append /v1beta/models/...
        "GEMINI_API_KEY": api_key,
        "HARNESSRL_REWARD_URL": f"{root}/reward",
        "HARNESSRL_ROLLOUT_ID": rollout_id,
        "HARNESSRL_TASK_ID": task_id,
    }
    if model is not None:
        env["HARNESSRL_MODEL"] = model
    return AttemptSpec(
        rollout_id=rollout_id,
        task_id=task_id,
        task_input=dict(task_input),
        command=tuple(config.command),
        timeout_s=assets.timeout_s or config.timeout_s,
        env=env,
        assets=assets,
        protected=tuple(dict.fromkeys([*assets.protected, *protected])),
    )


def unfinished_result(
    spec: AttemptSpec,
    status: RolloutStatus,
    kind: FailureKind | None,
    reason: str,
    *,
    started: float | None = None,
    attempt_dir: Path | None = None,
    workdir: Path | None = None,
    protected_sha256: dict[str, str] | None = None,
    handle: str | None = None,
    sandbox: Sandbox | None = None,
) -> AttemptResult:
    """A result for an attempt whose harness never ran to its end (start failure, cancel, lost Job)."""
    if kind is FailureKind.INFRA:
        logger.warning("rollout %s: %s (%s)", spec.rollout_id, status, reason)
    return AttemptResult(
        rollout_id=spec.rollout_id,
        status=status,
        failure_kind=kind,
        reason=reason,
        exit_code=None,
        timed_out=False,
        stdout="",
        stderr="",
        stdout_bytes=0,
        stderr_bytes=0,
        duration_s=0.0 if started is None else time.monotonic() - started,
        attempt_dir=attempt_dir,
        workdir=workdir,
        handle=handle,
        protected_sha256=protected_sha256 or {},
        sandbox=sandbox,
    )
