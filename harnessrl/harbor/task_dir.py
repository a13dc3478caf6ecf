"""One Harbor task folder read and checked: its instruction, ``task.toml`` and what its Dockerfile would put
in the agent's working directory.

harnessrl builds no image, so of ``environment/Dockerfile`` it carries out only what places files: the last
``WORKDIR`` and the ``COPY``/``ADD`` of build-context files into it. Everything else (``FROM``, ``RUN``,
``ENV``, copies elsewhere) is listed in ``EnvironmentPlan.skipped`` and reported with the task, because a
test that relies on it (a package ``RUN`` installed, a tool copied to ``/usr/local/bin``) sees the host.
"""

from __future__ import annotations

import glob
import json
import posixpath
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

INSTRUCTION, TASK_TOML, TEST_SH, SOLVE_SH = "instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh"


class HarborTaskError(ValueError):
    """A Harbor task folder is malformed; the message names the folder and the file."""


class _Section(BaseModel):
    """Harbor adds keys over time: unknown ones are kept (and ignored), known ones must have their type."""

    model_config = ConfigDict(extra="allow")


class VerifierSection(_Section):
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class AgentSection(_Section):
    timeout_sec: float | None = Field(None, gt=0)


class EnvironmentSection(_Section):
    docker_image: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class SolutionSection(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class TaskToml(_Section):
    """The fields of ``task.toml`` harnessrl reads (Harbor's ``TaskConfig``); docs/harbor.md lists the rest."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)


@dataclass(frozen=True, slots=True)
class Copy:
    """One ``COPY``/``ADD`` into the working directory: build-context patterns, and where they go."""

    sources: tuple[str, ...]
    dest: str  # relative to the WORKDIR ("" is the WORKDIR itself)
    into_dir: bool  # Docker's rule: several sources, a glob or a trailing "/" make the destination a folder


@dataclass(frozen=True, slots=True)
class EnvironmentPlan:
    """What of the task's environment harnessrl can reproduce on the host, and what it cannot."""

    workdir: str | None = None
    copies: tuple[Copy, ...] = ()
    skipped: tuple[str, ...] = ()

    def note(self) -> str:
        """The one line said with every attempt of the task (log and rollout record)."""
        what = f"; not carried out: {'; '.join(self.skipped)}" if self.skipped else ""
        return f"environment/Dockerfile not built; ran on the host{what}"


@dataclass(frozen=True, slots=True)
class HarborTask:
    path: Path
    id: str
    instruction: str
    config: TaskToml
    environment: EnvironmentPlan = field(default_factory=EnvironmentPlan)

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"


def is_task_dir(path: Path) -> bool:
    """A folder that means to be a Harbor task (then it must be a whole one)."""
    return path.is_dir() and any((path / name).exists() for name in (INSTRUCTION, TASK_TOML, TEST_SH))


def find_task_dirs(root: Path) -> list[Path]:
    """``root`` itself when it is a task, else its task subfolders (sorted; hidden folders skipped)."""
    if not root.is_dir():
        raise HarborTaskError(f"Harbor task folder not found: {root}")
    if is_task_dir(root):
        return [root]
    found = sorted(p for p in root.iterdir() if not p.name.startswith(".") and is_task_dir(p))
    if not found:
        raise HarborTaskError(f"{root}: no Harbor task folders in it (each holds {INSTRUCTION}, {TASK_TOML} "
                              f"and {TEST_SH})")
    return found


def read_task_dir(path: Path) -> HarborTask:
    """The task in folder ``path``; ``HarborTaskError`` naming the folder and file when it is malformed."""
    where = path.resolve()
    instruction_file = where / INSTRUCTION
    if not instruction_file.is_file():
        raise HarborTaskError(f"{where}: {INSTRUCTION} is missing (it holds what the agent is asked to do)")
    instruction = instruction_file.read_text(errors="replace").strip()
    if not instruction:
        raise HarborTaskError(f"{where}/{INSTRUCTION} is empty")
    toml_file = where / TASK_TOML
    if not toml_file.is_file():
        raise HarborTaskError(f"{where}: {TASK_TOML} is missing (timeouts and metadata; an empty file will do)")
    try:
        raw = tomllib.loads(toml_file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{where}/{TASK_TOML} is not valid TOML: {exc}") from None
    try:
        config = TaskToml.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"[{'.'.join(str(p) for p in e['loc'][:-1])}] {e['loc'][-1]}: {e['msg']}"
                             if len(e["loc"]) > 1 else f"{e['loc'][0] if e['loc'] else ''}: {e['msg']}"
                             for e in exc.errors())
        raise HarborTaskError(f"{where}/{TASK_TOML}: {problems}") from None
    if not (where / TEST_SH).is_file():
        raise HarborTaskError(f"{where}: {TEST_SH} is missing (it runs the tests and writes the reward to "
                              "/logs/verifier/reward.txt)")
    return HarborTask(path=where, id=where.name, instruction=instruction, config=config,
                      environment=plan_environment(where, config))


def plan_environment(task_dir: Path, config: TaskToml) -> EnvironmentPlan:
    """What ``environment/Dockerfile`` puts in its ``WORKDIR``, and the rest it would do (skipped here)."""
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        image = config.environment.docker_image
        return EnvironmentPlan(skipped=(f"image {image} not pulled",) if image else ("no environment/Dockerfile",))
    skipped: list[str] = []
    if config.environment.docker_image:
        skipped.append(f"image {config.environment.docker_image} not pulled")
    workdir = "/"
    planned: list[tuple[tuple[str, ...], str, bool]] = []  # sources, absolute destination, into a folder
    for lineno, instruction, args in _instructions(dockerfile):
        where = f"environment/Dockerfile:{lineno}"
        if instruction == "FROM":  # a new stage: only the last one's files end up in the image
            workdir, planned = "/", []
            skipped.append(f"FROM {args}")
        elif instruction == "WORKDIR":
            if "$" in args:
                raise HarborTaskError(f"{task_dir}/{where}: WORKDIR with a variable ({args}) is not supported")
            workdir = posixpath.normpath(posixpath.join(workdir, args.strip()))
        elif instruction in ("COPY", "ADD"):
            copy = _parse_copy(args)
            if copy is None:
                skipped.append(f"{instruction} {args}")
                continue
            sources, dest = copy
            if instruction == "ADD" and any("://" in s or s.endswith((".tar", ".gz", ".tgz", ".xz", ".bz2"))
                                            for s in sources):
                skipped.append(f"ADD {args}")
                continue
            for source in sources:
                if posixpath.normpath(source).startswith(".."):
                    raise HarborTaskError(f"{task_dir}/{where}: {source} is outside the build context")
            into_dir = len(sources) > 1 or dest.endswith("/") or any(glob.has_magic(s) for s in sources)
            planned.append((sources, posixpath.normpath(posixpath.join(workdir, dest)), into_dir))
        else:
            skipped.append(instruction)
    copies: list[Copy] = []
    for sources, dest, into_dir in planned:
        if workdir == "/" or not (dest == workdir or dest.startswith(workdir + "/")):
            skipped.append(f"COPY to {dest} (outside WORKDIR {workdir})")
            continue
        copies.append(Copy(sources, posixpath.relpath(dest, workdir) if dest != workdir else "", into_dir))
    return EnvironmentPlan(workdir=None if workdir == "/" else workdir, copies=tuple(copies),
                           skipped=tuple(dict.fromkeys(skipped)))  # five RUNs said once


def _instructions(dockerfile: Path) -> list[tuple[int, str, str]]:
    """(line number, instruction, arguments), continuation lines joined and comments dropped."""
    out: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for lineno, line in enumerate(dockerfile.read_text(errors="replace").splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = lineno
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = (pending + stripped).strip()
        pending = ""
        keyword, _, args = text.partition(" ")
        out.append((start, keyword.upper(), args.strip()))
    if pending.strip():
        keyword, _, args = pending.strip().partition(" ")
        out.append((start, keyword.upper(), args.strip()))
    return out


def _parse_copy(args: str) -> tuple[tuple[str, ...], str] | None:
    """(sources, destination) of a COPY/ADD, None for a form that copies nothing from the context."""
    words: list[str]
    if "<<" in args:  # a heredoc writes inline text, not context files
        return None
    rest = args.strip()
    flags: list[str] = []
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.strip()
    if any(f.startswith("--from") for f in flags):  # from another stage or image
        return None
    if rest.startswith("["):
        try:
            words = [str(w) for w in json.loads(rest)]
        except json.JSONDecodeError:
            return None
    else:
        try:
            words = shlex.split(rest)
        except ValueError:
            return None
    if len(words) < 2:
        return None
    return tuple(words[:-1]), words[-1]


def build_workspace(task: HarborTask, dest: Path) -> None:
    """Lay out in ``dest`` what the Dockerfile's copies put in its WORKDIR (Docker's rules: a folder source
    gives its contents, several sources or a trailing ``/`` make the destination a folder)."""
    context = task.path / "environment"
    dest.mkdir(parents=True, exist_ok=True)
    for copy in task.environment.copies:
        target = dest / copy.dest if copy.dest else dest
        for pattern in copy.sources:
            matches = sorted(glob.glob(str(context / pattern))) if glob.has_magic(pattern) else [str(context / pattern)]
            if not matches or not Path(matches[0]).exists():
                raise HarborTaskError(f"{task.path}/environment/Dockerfile copies {pattern}, which is not in "
                                      f"{context}")
            for match in map(Path, matches):
                if match.is_dir():
                    shutil.copytree(match, target, symlinks=True, dirs_exist_ok=True)
                elif copy.into_dir or copy.dest == "" or target.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(match, target / match.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(match, target)
