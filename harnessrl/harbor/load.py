"""A folder of Harbor tasks as harnessrl tasks: the instruction as the task input, the Dockerfile's working
directory as the workspace, ``tests/`` as hidden files and ``tests/test.sh`` as the task's verifier.

What the harness gets is what every task gives it (``runners/env.py``): the input ``{"instruction": ...}``,
so ``HARNESSRL_TASK_INSTRUCTION``, ``HARNESSRL_TASK_INPUT`` and its file, and a fresh copy of the workspace as
its cwd. The tests reach the workspace only after it has exited (``hidden_dir``), and ``verify.py`` runs
them. The workspace and hidden folders are laid out once per task content under the run directory (which
attempts never see), keyed by a digest of the task's files so an edited task is laid out again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.environments.task_env import ContainerTests, TaskEnvironment
from harnessrl.harbor.paths import relative_instruction
from harnessrl.harbor.task_dir import (
    HarborTask,
    HarborTaskError,
    build_workspace,
    find_task_dirs,
    read_task_dir,
)
from harnessrl.harbor.verify import resolve_env
from harnessrl.runners.spec import TaskAssets

logger = logging.getLogger(__name__)

#: The verifier of every Harbor task. ``-I``: the workspace (its cwd) must not be able to shadow a module.
VERIFIER_COMMAND = (sys.executable, "-I", "-m", "harnessrl.harbor.verify")
#: Where the task's ``tests/`` land, under the hidden files' destination, once the harness has exited.
TESTS_IN_HIDDEN = ".harbor/tests"
#: Task input key holding the instruction (``HARNESSRL_TASK_INSTRUCTION`` in the harness's environment).
INSTRUCTION_KEY = "instruction"


@dataclass(frozen=True, slots=True)
class HarborLoaded:
    """One Harbor task ready for the runner: its id, the harness's input and the assets."""

    id: str
    input: dict[str, Any]
    assets: TaskAssets
    task: HarborTask


def load_harbor_tasks(root: Path, cache: Path, *, runner_timeout_s: float,
                      verifier_timeout_s: float, container: bool = False) -> list[HarborLoaded]:
    """Every task under ``root`` (or ``root`` itself when it is one), laid out under ``cache``.

    ``container``: the tasks run in their own image (``[runner] environment = "container"``, or a Kubernetes
    pod): nothing is laid out, the instruction keeps its paths, the tests run in the container.
    Raises ``HarborTaskError`` naming the folder and file of the first malformed task. Says per task, at
    WARNING, that its environment was not built; once which tasks keep their own agent timeout, and which
    verifier timeouts the outer bound cuts short.
    """
    loaded = []
    for folder in find_task_dirs(root):
        task = read_task_dir(folder)
        if container:
            env = task_environment(task)
            loaded.append(HarborLoaded(task.id, {INSTRUCTION_KEY: task.instruction},
                                       TaskAssets(environment=env, timeout_s=task.config.agent.timeout_sec), task))
            continue
        workspace, hidden = _lay_out(task, cache)
        instruction, _ = relative_instruction(task.instruction, task.environment.workdir)
        note = task.environment.note()
        logger.warning("Harbor task %s: %s", task.id, note)
        verifier_input = {"harbor": {
            "task": task.id,
            "workdir": task.environment.workdir,
            "tests": TESTS_IN_HIDDEN,
            "timeout_sec": task.config.verifier.timeout_sec,
            "outer_timeout_s": verifier_timeout_s,
            "env": {**task.config.environment.env, **task.config.verifier.env},
            "note": note,
        }}
        assets = TaskAssets(workspace=workspace, hidden_dir=hidden, verifier_input=verifier_input,
                            timeout_s=task.config.agent.timeout_sec,
                            verifier=VERIFIER_COMMAND)
        loaded.append(HarborLoaded(task.id, {INSTRUCTION_KEY: instruction}, assets, task))
    _say_timeouts([t.task for t in loaded], runner_timeout_s, verifier_timeout_s)
    return loaded


def task_environment(task: HarborTask) -> TaskEnvironment:
    """The task's container as Harbor makes it: ``docker_image``, else ``environment/Dockerfile`` built; its
    limits; ``tests/`` copied to /tests after the agent and ``bash /tests/test.sh`` run there."""
    section = task.config.environment
    extra = section.model_extra or {}
    dockerfile = task.path / "environment" / "Dockerfile"
    if section.docker_image is None and not dockerfile.is_file():
        raise HarborTaskError(f"{task.path}: neither [environment] docker_image nor environment/Dockerfile: "
                              "a container task needs one")

    def number(key: str) -> float | None:
        value = extra.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise HarborTaskError(f"{task.path}/task.toml: [environment] {key} must be a number > 0, not {value!r}")
        return float(value)

    memory, storage = number("memory_mb"), number("storage_mb")
    build = number("build_timeout_sec")
    tests = ContainerTests(tests_dir=task.tests_dir, timeout_s=task.config.verifier.timeout_sec,
                           env=resolve_env({**section.env, **task.config.verifier.env}, os.environ))
    return TaskEnvironment(
        name=task.id, image=section.docker_image,
        build_context=None if section.docker_image else dockerfile.parent,
        workdir=task.environment.workdir, cpus=number("cpus"),
        memory_mb=int(memory) if memory else None, storage_mb=int(storage) if storage else None,
        allow_internet=bool(extra.get("allow_internet", False)), build_timeout_s=build, tests=tests)


def _say_timeouts(tasks: list[HarborTask], runner_timeout_s: float, verifier_timeout_s: float) -> None:
    agent = [f"{t.id} ({t.config.agent.timeout_sec:g}s)" for t in tasks
             if t.config.agent.timeout_sec is not None and t.config.agent.timeout_sec != runner_timeout_s]
    if agent:  # applied (TaskAssets.timeout_s); said once, since it differs from the config's
        logger.info("Harbor [agent] timeout_sec applied per task instead of [runner] timeout_s = %gs: %s",
                    runner_timeout_s, ", ".join(agent[:20]))
    slow = [f"{t.id} ({t.config.verifier.timeout_sec:g}s)" for t in tasks
            if t.config.verifier.timeout_sec > verifier_timeout_s]
    if slow:
        logger.warning("Harbor [verifier] timeout_sec above [rewards] verifier_timeout_s = %gs: their tests are "
                       "stopped there and the attempt counts as an infra failure; raise verifier_timeout_s for "
                       "%s", verifier_timeout_s, ", ".join(slow[:20]))


def _digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            sha.update(path.relative_to(folder).as_posix().encode() + b"\0")
            sha.update(hashlib.sha256(path.read_bytes()).digest())
            sha.update(b"x" if os.access(path, os.X_OK) else b"-")
    return sha.hexdigest()[:16]


def _lay_out(task: HarborTask, cache: Path) -> tuple[Path, Path]:
    """(workspace, hidden) folders of ``task`` under ``cache``, built once per task content (atomically: a
    concurrent load of the same run either finds the finished folder or builds its own and drops it)."""
    final = cache / f"{task.id}-{_digest(task.path)}"
    if not final.is_dir():
        tmp = cache / f".tmp-{task.id}-{uuid.uuid4().hex[:8]}"
        try:
            build_workspace(task, tmp / "workspace")
            shutil.copytree(task.tests_dir, tmp / "hidden" / TESTS_IN_HIDDEN, symlinks=True)
            try:
                tmp.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
        except OSError as exc:
            raise HarborTaskError(f"{task.path}: could not lay out its workspace under {cache}: {exc}") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / "workspace", final / "hidden"
