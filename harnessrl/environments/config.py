"""``ContainerConfig``: the ``[runner.container]`` section, how attempts run in their task's image.

Read with ``[runner] environment = "container"`` (docs/containers.md). Every knob is here with a default
that works on a laptop with Podman or Docker installed; the task decides the image, this decides how.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection


class ContainerConfig(ConfigSection):
    """How an attempt's container is made, what it may reach, and how it is graded."""

    engine: Literal["auto", "podman", "docker"] = Field(
        "auto", description="The container engine's CLI (both take the same arguments); `auto`: podman, else docker."
    )
    default_image: str | None = Field(
        None,
        description="Image of tasks that name none (no Harbor Dockerfile or docker_image, no JSONL `image`). "
        "None: such a task is refused at start.",
    )
    harness: Literal["mount", "image", "install"] = Field(
        "mount",
        description="How the harness reaches the container. `mount`: this Python environment (the venv and "
        "its interpreter), the folders of the command's absolute file arguments and `mounts`, read-only at "
        "their own paths (the image must be glibc-based, as the host is); `image`: it is in the image "
        "already; `install`: `install` runs once per image and the result is kept as a derived image.",
    )
    mounts: list[str] = Field(
        default_factory=list,
        description="More host paths mounted read-only at their own path (e.g. the coding CLIs' npm prefix "
        "and its Node runtime).",
    )
    install: list[str] = Field(
        default_factory=list,
        description="With harness = `install`: the command (run with `sh -c` when one string) that installs "
        "the harness into a task image; its result is committed as a derived image, reused by every attempt.",
    )
    grading: Literal["same", "clean"] = Field(
        "same",
        description="`same` (Harbor's semantics): the tests are copied into the attempt's container after the "
        "harness exits and run there. `clean`: only the workspace (the workdir) is copied into a fresh "
        "container of the task image and the tests run there: changes elsewhere, and processes left behind, "
        "cannot touch them.",
    )
    allow_internet: bool = Field(
        False,
        description="Grant the internet to tasks that ask for it (Harbor `allow_internet = true`). Otherwise "
        "every container has no network but the gateway.",
    )
    cpus: float | None = Field(2.0, gt=0, description="CPU limit of tasks that set none (Harbor `cpus`).")
    memory_mb: int | None = Field(
        4096, gt=0, description="Memory limit of tasks that set none (Harbor `memory_mb`); swap is not added."
    )
    pids_limit: int = Field(
        1024, ge=16, description="Processes (and threads) a container may hold at once: a fork bomb stops there."
    )
    storage_mb: int | None = Field(
        10240,
        gt=0,
        description="Disk an attempt's container may write (its writable layer) for tasks that set none (Harbor "
        "`storage_mb`): measured every second, and an attempt past it is stopped as the agent's failure "
        "(environments/storage.py). None: no limit.",
    )
    build_timeout_s: float = Field(900.0, gt=0, description="Limit of one image build (Harbor `build_timeout_sec`).")
    pull: Literal["never", "missing"] = Field(
        "never",
        description="`never`: images must be on this machine (built, imported or pulled beforehand); `missing`: "
        "the engine pulls an image it lacks.",
    )
    user: str | None = Field(None, description="User the harness runs as (default: the image's USER).")
    run_args: list[str] = Field(
        default_factory=list, description="Extra arguments for the engine's `create` (after harnessrl's own)."
    )
    pool_size: int = Field(
        0,
        ge=0,
        description="Containers kept created and started ahead of attempts (environments/pool.py), so an "
        "attempt only execs its harness; each is used by one attempt, then removed. Pays where attempts share "
        "an image and the host idles while they wait on the model (docs/containers-choices.md); 0: none.",
    )
    keep_containers: Literal["none", "failed", "all"] = Field(
        "none", description="Which attempts' containers survive release (for debugging); removed otherwise."
    )
