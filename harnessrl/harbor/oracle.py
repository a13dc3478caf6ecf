"""A harness that solves a Harbor task with the task's own ``solution/solve.sh`` (Harbor's oracle agent).

``[runner] command = ["python", "-I", "-m", "harnessrl.harbor.oracle", "/abs/path/to/tasks"]``: every
attempt runs its task's reference solution in the workspace, so a collection scores 1 on every task whose
tests and solution agree (docs/harbor.md). It calls no model. The task folder must be readable by the
attempt: a bubblewrap sandbox hides the configured task folders from attempts, so run it with
``[runner] sandbox = "none"`` (or point it at a copy). ``/solution``, ``/logs/agent`` and the Dockerfile's
``WORKDIR`` in the solution's files are mapped as for the tests (``paths.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harnessrl.harbor.paths import AGENT_LOGS, LOGS, SOLUTION, rewrite_tree
from harnessrl.harbor.task_dir import HarborTaskError, find_task_dirs, read_task_dir
from harnessrl.harbor.verify import resolve_env


def task_folder(root: Path, task_id: str) -> Path:
    """The folder of task ``task_id`` in a task set (or the set itself when it is that one task)."""
    for folder in find_task_dirs(root):
        if folder.name == task_id:
            return folder
    raise HarborTaskError(f"no Harbor task {task_id!r} under {root}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -I -m harnessrl.harbor.oracle TASKS_DIR (run by harnessrl as a harness)",
              file=sys.stderr)
        return 2
    root, task_id = Path(argv[0]), os.environ.get("HARNESSRL_TASK_ID", "")
    if not root.is_dir():
        print(f"harbor oracle: {root} is not readable here; a sandboxed attempt cannot see the task folders "
              '(set [runner] sandbox = "none" for oracle runs)', file=sys.stderr)
        return 2
    try:
        task = read_task_dir(task_folder(root, task_id))
    except HarborTaskError as exc:
        print(f"harbor oracle: {exc}", file=sys.stderr)
        return 2
    solve = task.path / "solution" / "solve.sh"
    if not solve.is_file():
        print(f"harbor oracle: {solve} is missing", file=sys.stderr)
        return 2
    workspace = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="harbor-oracle-") as tmp:
        solution, logs = Path(tmp) / "solution", Path(tmp) / "logs"
        shutil.copytree(solve.parent, solution, symlinks=True)
        mapping = {SOLUTION: str(solution), LOGS: str(logs), AGENT_LOGS: str(logs / "agent")}
        (logs / "agent").mkdir(parents=True)
        if task.environment.workdir:
            mapping[task.environment.workdir] = str(workspace)
        rewrite_tree(solution, mapping)
        env = {**os.environ, **resolve_env(task.config.solution.env, os.environ)}
        return subprocess.run(["bash", str(solution / "solve.sh")], cwd=workspace, env=env,
                              stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
