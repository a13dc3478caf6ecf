"""The swe example's tasks are sound: each bug is real (hidden tests fail on the shipped repository) and
fixable (they pass with the reference fix), and every test file is protected. Fast: no model involved."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SWE = Path(__file__).resolve().parents[3] / "examples" / "swe"
TASKS = [json.loads(line) for name in ("train.jsonl", "eval.jsonl")
         for line in (SWE / "tasks" / name).read_text().splitlines() if line.strip()]


def verify(workdir: Path, hidden: Path) -> float:
    """Copy the hidden tests in (as harnessrl does after the agent exits) and run the example's verifier."""
    shutil.copytree(hidden, workdir, dirs_exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HARNESSRL_HIDDEN_DIR": str(hidden)}
    proc = subprocess.run([sys.executable, str(SWE / "verify.py")], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return float(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_bug_is_real_and_fixable(task: dict, tmp_path: Path) -> None:
    base = SWE / "tasks"
    repo, hidden = base / task["workspace"], base / task["hidden_dir"]
    solution = repo.parent / "solution"
    assert task["input"]["issue"] and set(task) >= {"id", "input", "workspace", "hidden_dir", "protected"}

    buggy = tmp_path / "buggy"
    shutil.copytree(repo, buggy)
    assert verify(buggy, hidden) == 0.0

    fixed = tmp_path / "fixed"
    shutil.copytree(repo, fixed)
    for f in solution.iterdir():
        shutil.copy(f, fixed / f.name)
    assert verify(fixed, hidden) == 1.0

    # the visible tests alone pass on the buggy repo: the issue text, not a failing test, tells the agent
    proc = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests"], cwd=repo,
                          capture_output=True, text=True, timeout=60, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    protected = {p.relative_to(repo).as_posix() for g in task["protected"] for p in repo.glob(g)}
    assert protected == {p.relative_to(repo).as_posix() for p in (repo / "tests").rglob("*.py")}
    assert not any(p.name.startswith("test_hidden") for p in repo.rglob("*"))


def test_verifier_refuses_to_score_without_hidden_tests(tmp_path: Path) -> None:
    """Hidden tests that never arrived are the verifier's problem (infra), not a 0 for the agent."""
    task = TASKS[0]
    work = tmp_path / "w"
    shutil.copytree(SWE / "tasks" / task["workspace"], work)
    env = {"PATH": "/usr/bin:/bin", "HARNESSRL_HIDDEN_DIR": str(SWE / "tasks" / task["hidden_dir"])}
    proc = subprocess.run([sys.executable, str(SWE / "verify.py")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "hidden tests missing" in proc.stderr
