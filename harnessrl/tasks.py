"""Loading tasks: JSONL files (or a Hugging Face dataset when `datasets` is installed) into ``Task``s.

A JSONL line is ``{"id": "t1", "input": {...}}`` plus optional runner/verifier assets (``workspace``,
``hidden_dir``, ``protected``, ...) that stay out of ``input`` so the harness never sees them; see
``harnessrl.runners.TaskAssets``. A folder instead of a file is a set of Harbor tasks (``harnessrl/harbor/``,
docs/harbor.md). Ids must be unique across both splits: a held-out task that is also a
training task would make the evaluation meaningless.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.config import HarnessConfig, TasksConfig
from harnessrl.harbor.load import load_harbor_tasks
from harnessrl.harbor.task_dir import HarborTaskError
from harnessrl.runners import TaskAssets
from harnessrl.runners.config import NO_LOCAL_VERIFIER_ON_KUBERNETES
from harnessrl.types import Task, TaskSplit


class TaskLoadError(ValueError):
    """A task file is missing or malformed; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class LoadedTask:
    """A task plus what the runner and verifier need that the harness must not see."""

    task: Task
    assets: TaskAssets


def _record_to_task(record: dict[str, Any], cfg: TasksConfig, run_id: str, split: TaskSplit, where: str) -> Task:
    if cfg.id_field not in record:
        raise TaskLoadError(f"{where}: task has no {cfg.id_field!r} field")
    task_id = str(record[cfg.id_field])
    if cfg.input_field is None:
        task_input = {k: v for k, v in record.items() if k != cfg.id_field}
    else:
        task_input = record.get(cfg.input_field, {})
    if not isinstance(task_input, dict):
        raise TaskLoadError(f"{where}: {cfg.input_field!r} must be an object, got {type(task_input).__name__}")
    return Task(run_id=run_id, id=task_id, input=task_input, split=split)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise TaskLoadError(f"task file not found: {path}")
    records = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskLoadError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise TaskLoadError(f"{path}:{lineno}: each line must be a JSON object")
        records.append(record)
    return records


def _dataset_records(cfg: TasksConfig, split: str) -> list[dict[str, Any]]:
    try:
        import datasets  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise TaskLoadError("[tasks] dataset needs the `datasets` package: pip install datasets") from None
    assert cfg.dataset is not None
    return [dict(r) for r in datasets.load_dataset(cfg.dataset, split=split)]


def load_tasks(config: HarnessConfig, run_id: str) -> dict[TaskSplit, list[LoadedTask]]:
    """Both splits of the configured task set; raises ``TaskLoadError`` with a precise message."""
    cfg = config.tasks
    sources: dict[TaskSplit, tuple[list[dict[str, Any]], Path | None]] = {}
    harbor: dict[TaskSplit, Path] = {}
    swe: dict[TaskSplit, Path] = {}
    if cfg.dataset:
        sources[TaskSplit.TRAIN] = (_dataset_records(cfg, cfg.dataset_train_split), None)
        if cfg.dataset_eval_split:
            sources[TaskSplit.EVAL] = (_dataset_records(cfg, cfg.dataset_eval_split), None)
    else:
        for split, rel in ((TaskSplit.TRAIN, cfg.train), (TaskSplit.EVAL, cfg.eval)):
            path = config.resolve(rel)
            if path is not None and cfg.format == "swebench":
                swe[split] = path
            elif path is not None and _is_harbor(path, cfg.format, split):
                harbor[split] = path
            elif path is not None:
                sources[split] = (read_jsonl(path), path.parent)
    out: dict[TaskSplit, list[LoadedTask]] = {TaskSplit.TRAIN: [], TaskSplit.EVAL: []}
    seen: dict[str, TaskSplit] = {}
    for split, root in harbor.items():
        try:
            loaded = load_harbor_tasks(root, config.run_dir / "harbor", runner_timeout_s=config.runner.timeout_s,
                                       verifier_timeout_s=config.rewards.verifier_timeout_s,
                                       container=_in_containers(config))
        except HarborTaskError as exc:
            raise TaskLoadError(str(exc)) from None
        for h in loaded:
            if h.id in seen:
                raise TaskLoadError(f"task id {h.id!r} appears twice ({seen[h.id].value} and {split.value})")
            seen[h.id] = split
            out[split].append(LoadedTask(Task(run_id=run_id, id=h.id, input=h.input, split=split), h.assets))
    for split, path in swe.items():
        for lt in _swebench(config, path, run_id, split):
            if lt.task.id in seen:
                raise TaskLoadError(f"task id {lt.task.id!r} appears twice ({seen[lt.task.id].value} and {split.value})")
            seen[lt.task.id] = split
            out[split].append(lt)
    for split, (records, base) in sources.items():
        for i, record in enumerate(records):
            task = _record_to_task(record, cfg, run_id, split, f"{split.value} task #{i + 1}")
            if task.id in seen:
                raise TaskLoadError(f"task id {task.id!r} appears twice ({seen[task.id].value} and {split.value})")
            seen[task.id] = split
            try:
                assets = TaskAssets.from_record(record, base or config.base_dir)
            except ValueError as exc:
                raise TaskLoadError(f"{split.value} task {task.id!r}: {exc}") from None
            if assets.environment is not None and not _in_containers(config):
                raise TaskLoadError(f"{split.value} task {task.id!r} names an image: it runs in a container, so set "
                                    '[runner] environment = "container" (docs/containers.md)')
            if assets.verifier and config.runner.kind == "kubernetes":
                raise TaskLoadError(f"{split.value} task {task.id!r} names a 'verifier': "
                                    f"{NO_LOCAL_VERIFIER_ON_KUBERNETES}")
            out[split].append(LoadedTask(task, assets))
    if config.runner.kind == "kubernetes":
        _check_task_pods(out)
    return out


def _swebench(config: HarnessConfig, path: Path, run_id: str, split: TaskSplit) -> list[LoadedTask]:
    """SWE-bench instances (a JSONL of dataset rows): each in its instance image, graded by swebench's rule."""
    from harnessrl.swebench import SwebenchRecordError, load_swebench_tasks

    if not _in_containers(config):
        raise TaskLoadError('[tasks] format = "swebench" runs each instance in its image: set [runner] environment = '
                            '"container" (docs/swebench.md)')
    try:
        loaded = load_swebench_tasks(path)
    except SwebenchRecordError as exc:
        raise TaskLoadError(str(exc)) from None
    return [LoadedTask(Task(run_id=run_id, id=s.id, input=s.input, split=split), TaskAssets(environment=s.environment))
            for s in loaded]


def _in_containers(config: HarnessConfig) -> bool:
    """Whether tasks run in their own image: local containers, or always as a Kubernetes pod."""
    return config.runner.environment == "container" or config.runner.kind == "kubernetes"


def _check_task_pods(tasks: dict[TaskSplit, list[LoadedTask]]) -> None:
    """Refuse at start what a Kubernetes pod cannot run (a task with only a Dockerfile, tests over 1 MiB)."""
    from harnessrl.runners.k8s_task_pod import TaskPodError, check_task

    for split, loaded in tasks.items():
        for lt in loaded:
            if lt.assets.environment is not None:
                try:
                    check_task(lt.assets.environment)
                except TaskPodError as exc:
                    raise TaskLoadError(f"{split.value} task {lt.task.id!r}: {exc}") from None


def _is_harbor(path: Path, fmt: str, split: TaskSplit) -> bool:
    """Whether ``[tasks] <split>`` names Harbor task folders (``format``, or by what is on disk)."""
    if fmt == "harbor" and not path.is_dir():
        raise TaskLoadError(f'[tasks] {split.value} = {path}: format = "harbor" needs a folder of Harbor tasks')
    if fmt == "jsonl" and path.is_dir():
        raise TaskLoadError(f'[tasks] {split.value} = {path} is a folder; format = "jsonl" needs a JSONL file')
    return fmt == "harbor" or (fmt == "auto" and path.is_dir())
