"""Every task of examples/chores is sound: its hidden check fails on the shipped repository, passes after
the one command a developer would type, and fails when that command takes more than the task asked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHORES = Path(__file__).resolve().parents[3] / "examples" / "chores"
REFERENCE = {"mkdir": "mkdir {}", "touch": "touch {}", "rm": "rm {}", "rmdir": "rm -r {}"}


def _tasks() -> list[dict]:
    return [json.loads(line) for name in ("train.jsonl", "eval.jsonl")
            for line in (CHORES / "tasks" / name).read_text().splitlines()]


def _score(workspace: Path, task: dict) -> float:
    shutil.copytree(CHORES / "hidden", workspace, dirs_exist_ok=True)  # what harnessrl does after the agent
    env = {**os.environ, "HARNESSRL_VERIFIER_INPUT": json.dumps(task["verifier_input"])}
    out = subprocess.run([sys.executable, str(CHORES / "verify.py")], cwd=workspace, env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def _workspace(tmp_path: Path, name: str) -> Path:
    ws = tmp_path / name
    shutil.copytree(CHORES / "repo", ws)
    return ws


def test_the_task_files_are_what_make_tasks_writes(tmp_path: Path) -> None:
    """Catches a repository file the clone lacks (a .gitignore'd name) as well as a stale task file."""
    subprocess.run([sys.executable, str(CHORES / "make_tasks.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for name in ("train.jsonl", "eval.jsonl"):
        assert (tmp_path / name).read_text() == (CHORES / "tasks" / name).read_text()
    tasks = _tasks()
    assert len({t["id"] for t in tasks}) == len(tasks)
    train = {t["verifier_input"]["name"] for t in tasks[:sum(1 for _ in open(CHORES / "tasks" / "train.jsonl"))]}
    held = {t["verifier_input"]["name"] for t in tasks} - train
    assert held and not held & train  # held-out tasks name things no train task names


@pytest.mark.parametrize("task", _tasks(), ids=lambda t: t["id"])
def test_hidden_check_fails_before_and_passes_after_the_reference_command(tmp_path: Path, task: dict) -> None:
    chore = task["verifier_input"]
    assert _score(_workspace(tmp_path, "shipped"), task) == 0.0
    fixed = _workspace(tmp_path, "fixed")
    subprocess.run(REFERENCE[chore["kind"]].format(chore["name"]), shell=True, cwd=fixed, check=True)
    assert _score(fixed, task) == 1.0
    assert task["protected"] == ["tests/**/*.py"]


@pytest.mark.parametrize("kind", ["rm", "rmdir"])
def test_deleting_more_than_asked_scores_zero(tmp_path: Path, kind: str) -> None:
    task = next(t for t in _tasks() if t["verifier_input"]["kind"] == kind)
    ws = _workspace(tmp_path, "greedy")
    subprocess.run("rm -rf ./*", shell=True, cwd=ws, check=True)
    assert _score(ws, task) == 0.0
