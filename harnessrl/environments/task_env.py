"""``TaskEnvironment``: the container a task asks to run in (its image, or a folder to build one from).

A task brings its own environment in the field's real workloads: a Harbor task its ``[environment]
docker_image`` or ``environment/Dockerfile``, a SWE-bench instance its instance image, a JSONL record an
``image`` field. The runner decides where that environment lives (a local Podman/Docker container, or the
pod of a Kubernetes Job); this record only says what the task asked for, so one task set runs on either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class ContainerTests:
    """How a task is graded inside its container (Harbor's semantics, which every task kind maps onto).

    ``tests_dir`` (a folder on the controller's disk) is copied to ``tests_path`` in the container only
    after the harness has exited; ``command`` then runs there (cwd: the workdir) and writes its reward to
    ``reward_dir``/``reward.txt`` or ``reward.json``. ``timeout_s``: the tests' own limit (past it: 0).
    ``env``: the tests' variables (Harbor's ``[verifier] env``).
    """

    tests_dir: Path
    command: tuple[str, ...] = ("bash", "/tests/test.sh")
    tests_path: str = "/tests"
    reward_dir: str = "/logs/verifier"
    timeout_s: float = 600.0
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskEnvironment:
    """The image a task runs in, and its limits. Either ``image`` or ``build_context`` names the image.

    ``image``: a ready image name (pulled by the engine only where ``[runner.container] pull`` allows).
    ``build_context``: a folder holding ``dockerfile``; it is built once per content hash and reused.
    ``workdir``: where the harness starts (default: the image's ``WORKDIR``). ``cpus``, ``memory_mb``,
    ``storage_mb``: Harbor's limits (None: the config's). ``allow_internet``: the task asks for the
    internet (granted only when ``[runner.container] allow_internet`` is true). ``tests``: how it is
    graded in the container (None: the task has no in-container tests). ``name``: a readable stem for
    the built image's tag (the task id).
    """

    name: str
    image: str | None = None
    build_context: Path | None = None
    dockerfile: str = "Dockerfile"
    workdir: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    allow_internet: bool = False
    build_timeout_s: float | None = None
    tests: ContainerTests | None = None
    #: The grader for this task kind's own rule (``"harbor"``: the reward file; ``"swebench"``: the
    #: official package's log parser and resolution rule), and what it needs beyond ``tests``.
    grader: str = "harbor"
    grader_input: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.image is None) == (self.build_context is None):
            raise ValueError(f"task {self.name!r}: an environment needs an image or a build folder (exactly one)")
