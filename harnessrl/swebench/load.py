"""SWE-bench instances (JSONL rows, as the Hugging Face datasets hold them) as harnessrl tasks.

A SWE-bench harness gets the issue text and the repository at ``/testbed`` in the instance's image, at the
base commit, and nothing else: no hints, no tests, no gold patch. So the task input is
``{"instruction": problem_statement}`` (what every harnessrl task gives a harness); the repository, commit,
tests and eval script go to the grader alone (``TaskEnvironment.grader_input``), which the harness never
sees.

A record is a row of SWE-bench (``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``version``; the two test lists are JSON strings in the
published datasets and lists in some copies: both are read). swebench 5.x rows also carry ``image``,
``eval_script``, ``log_parser`` and ``eval_type``, used as given. A row without ``eval_script`` gets
``eval_script.make_eval_script`` (its ``test_cmd``, default ``pytest -rA``, on the test patch's files) and
``log_parser`` ``parse_log_pytest`` unless it names one; without an image name, the name swebench's own
image builder gives the instance (``ImageSpec.name``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.environments.task_env import TaskEnvironment
from harnessrl.swebench.eval_script import TestPatchError, make_eval_script

#: Where SWE-bench's images keep the repository (swebench's ``CONTAINER_WORKDIR``).
WORKDIR = "/testbed"
#: The Docker Hub namespace of SWE-bench's published instance images.
DEFAULT_NAMESPACE = "swebench"
#: The log parser of a row that names none (its tests run under ``pytest -rA``).
DEFAULT_LOG_PARSER = "parse_log_pytest"
#: Task input key holding the problem statement (``HARNESSRL_TASK_INSTRUCTION`` in the harness's env).
INSTRUCTION_KEY = "instruction"
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch", "version",
            "FAIL_TO_PASS", "PASS_TO_PASS")
NEED_SWEBENCH = "SWE-bench tasks need the swebench package: pip install 'harnessrl[swebench]'"


class SwebenchRecordError(ValueError):
    """A SWE-bench record is malformed; the message names the file and line (or the record's place)."""


@dataclass(frozen=True, slots=True)
class SwebenchTask:
    """One instance ready for the runner: its id, the harness's input, and its container and grader."""

    id: str
    input: dict[str, Any]
    environment: TaskEnvironment


def load_swebench_tasks(path: Path, *, namespace: str | None = DEFAULT_NAMESPACE,
                        arch: str = "amd64") -> list[SwebenchTask]:
    """Every instance of a JSONL file. ``namespace``/``arch``: the image names of rows that give none
    (``namespace`` None: the local names swebench's builder tags, ``sweb.eval.x86_64.<id>:latest``)."""
    tasks: list[SwebenchTask] = []
    seen: dict[str, str] = {}
    for where, record in _read_jsonl(path):
        task = swebench_task(record, where=where, namespace=namespace, arch=arch)
        if task.id in seen:
            raise SwebenchRecordError(f"{where}: instance_id {task.id!r} appears twice (first at {seen[task.id]})")
        seen[task.id] = where
        tasks.append(task)
    return tasks


def swebench_task(record: Mapping[str, Any], *, where: str, namespace: str | None = DEFAULT_NAMESPACE,
                  arch: str = "amd64") -> SwebenchTask:
    """One record as a task (``where``: how errors name it, e.g. ``file.jsonl:3``)."""
    missing = [k for k in REQUIRED if record.get(k) in (None, "")]
    if missing:
        raise SwebenchRecordError(f"{where}: a SWE-bench record needs {', '.join(missing)}")
    strings = {k: record[k] for k in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")}
    for key, value in strings.items():
        if not isinstance(value, str):
            raise SwebenchRecordError(f"{where}: {key} must be a string, not {type(value).__name__}")
    instance_id = strings["instance_id"]
    fail_to_pass = _test_list(record["FAIL_TO_PASS"], "FAIL_TO_PASS", where)
    if not fail_to_pass:
        raise SwebenchRecordError(f"{where}: FAIL_TO_PASS is empty: every attempt would count as resolved")
    if record.get("image_assets"):
        raise SwebenchRecordError(f"{where}: image_assets (SWE-bench Multimodal's binary test files, fetched by "
                                  "URL at grading) are not supported")
    version = record["version"]
    if isinstance(version, bool) or not isinstance(version, str | int | float):
        raise SwebenchRecordError(f"{where}: version must be a string, not {version!r}")
    image = record.get("image") or record.get("image_name") or instance_image(instance_id, namespace, arch)
    if not isinstance(image, str):
        raise SwebenchRecordError(f"{where}: image must be an image name, not {image!r}")
    grader_input = {
        "instance_id": instance_id,
        "repo": strings["repo"],
        "version": str(version),
        "base_commit": strings["base_commit"],
        "image": image,
        "test_patch": strings["test_patch"],
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": _test_list(record["PASS_TO_PASS"], "PASS_TO_PASS", where),
        **_grading_rule(record, strings, where),
    }
    environment = TaskEnvironment(name=instance_id, image=image, workdir=WORKDIR, grader="swebench",
                                  grader_input=grader_input)
    return SwebenchTask(instance_id, {INSTRUCTION_KEY: strings["problem_statement"]}, environment)


def instance_image(instance_id: str, namespace: str | None = DEFAULT_NAMESPACE, arch: str = "amd64") -> str:
    """swebench's name for an instance's image (``swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest``
    on Docker Hub, ``sweb.eval.x86_64.astropy__astropy-12907:latest`` built locally)."""
    try:
        from swebench.image_builder.image_spec import ImageSpec
    except ImportError:
        raise SwebenchRecordError(NEED_SWEBENCH) from None
    # ImageSpec wants a Dockerfile to build from; the name does not depend on it.
    return str(ImageSpec(instance_id=instance_id, dockerfile="-", namespace=namespace, arch=arch).name)


def _grading_rule(record: Mapping[str, Any], strings: Mapping[str, str], where: str) -> dict[str, str]:
    """``eval_script``, ``log_parser`` and ``eval_type``: the record's, else harnessrl's defaults, each
    checked against what the installed swebench knows."""
    try:
        from swebench.harness.constants import FAIL_ONLY_REPOS, EvalType
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError:
        raise SwebenchRecordError(NEED_SWEBENCH) from None
    eval_script, test_cmd = record.get("eval_script"), record.get("test_cmd")
    if eval_script and test_cmd:
        raise SwebenchRecordError(f"{where}: give eval_script or test_cmd, not both (eval_script runs the tests)")
    if eval_script is None or eval_script == "":
        if test_cmd is not None and not isinstance(test_cmd, str):
            raise SwebenchRecordError(f"{where}: test_cmd must be a shell command string, not {test_cmd!r}")
        try:
            eval_script = make_eval_script(base_commit=strings["base_commit"], test_patch=strings["test_patch"],
                                           workdir=WORKDIR, test_cmd=test_cmd)
        except TestPatchError as exc:
            raise SwebenchRecordError(f"{where}: {exc}") from None
    elif not isinstance(eval_script, str):
        raise SwebenchRecordError(f"{where}: eval_script must be a string")
    log_parser = record.get("log_parser") or DEFAULT_LOG_PARSER
    if log_parser not in PARSER_REGISTRY:
        raise SwebenchRecordError(f"{where}: log_parser {log_parser!r} is not one of swebench's "
                                  f"({', '.join(sorted(PARSER_REGISTRY))})")
    default_type = EvalType.FAIL_ONLY if strings["repo"] in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    eval_type = record.get("eval_type") or default_type.value
    if eval_type not in {t.value for t in EvalType}:
        raise SwebenchRecordError(f"{where}: eval_type {eval_type!r} is not one of "
                                  f"{', '.join(t.value for t in EvalType)}")
    return {"eval_script": eval_script, "log_parser": log_parser, "eval_type": eval_type}


def _test_list(value: Any, key: str, where: str) -> list[str]:
    """A test-id list, given as a list or (the published datasets) a JSON string of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SwebenchRecordError(f"{where}: {key} is a string but not a JSON list ({exc.msg})") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise SwebenchRecordError(f"{where}: {key} must be a list of test ids (or a JSON string of one)")
    return value


def _read_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``("file:line", record)`` for each non-blank line."""
    if not path.is_file():
        raise SwebenchRecordError(f"SWE-bench file not found: {path}")
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SwebenchRecordError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise SwebenchRecordError(f"{where}: each line must be a JSON object (one SWE-bench instance)")
        yield where, record
