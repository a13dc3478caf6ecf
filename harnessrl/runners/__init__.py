"""Where attempts run: ``make_runner(config, workdir_root)`` gives a ``Runner`` for the configured kind.

See ``base.py`` for the controller-facing flow and ``spec.py`` for the failure policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harnessrl.runners.base import OnStart, Runner, RunnerError
from harnessrl.runners.config import KubernetesConfig, RunnerConfig
from harnessrl.runners.spec import AttemptResult, AttemptSpec, TaskAssets, make_attempt_spec

__all__ = [
    "AttemptResult",
    "AttemptSpec",
    "KubernetesConfig",
    "OnStart",
    "Runner",
    "RunnerConfig",
    "RunnerError",
    "TaskAssets",
    "make_attempt_spec",
    "make_runner",
]


def make_runner(
    config: RunnerConfig,
    workdir_root: Path | str | None = None,
    *,
    run_id: str = "default",
    hide: Sequence[Path | str] = (),
) -> Runner:
    """The runner for ``config.kind``; attempt directories go under ``workdir_root`` (local only).

    ``run_id`` labels the Kubernetes Jobs of this run (the runner watches and re-attaches by it).
    ``hide``: paths a sandboxed local attempt must not see (run directory, store, task files, hidden tests).
    """
    if config.kind == "local" and config.environment == "container":
        from harnessrl.runners.container import ContainerRunner

        return ContainerRunner(config, workdir_root, run_id=run_id, hide=hide)
    if config.kind == "local":
        from harnessrl.runners.local import LocalRunner

        return LocalRunner(config, workdir_root, hide=hide)
    if config.kind == "kubernetes":
        from harnessrl.runners.kubernetes import KubernetesRunner

        return KubernetesRunner(config, run_id=run_id)
    raise RunnerError(f"runner kind {config.kind!r} is not available in this version")
