"""examples/containers: Harbor tasks with their own Dockerfiles, the demo's agent inside each task's
container, graded there by the task's tests. The task folders are what make_tasks.py writes; a short run of
the example through `harnessrl train` (real Podman, the packaged model) records and grades every attempt."""

from __future__ import annotations

import asyncio
import filecmp
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.environments.engine import LABEL_RUN, EngineUnavailable, find_engine
from harnessrl.store import open_store
from harnessrl.types import FailureKind

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run_config import write_run_config  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "containers"


def test_the_task_folders_are_what_make_tasks_writes(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "make_tasks.py"), "--out", str(tmp_path)], check=True)
    for split in ("train", "eval"):
        diff = filecmp.dircmp(tmp_path / split, EXAMPLE / "tasks" / split)
        assert not diff.left_only and not diff.right_only
        for task in diff.common_dirs:
            for rel in ("instruction.md", "task.toml", "environment/Dockerfile", "environment/atlas.json",
                        "tests/test.sh", "tests/check.py", "tests/expected.txt"):
                assert (tmp_path / split / task / rel).read_bytes() == (EXAMPLE / "tasks" / split / task / rel
                                                                        ).read_bytes(), f"{task}/{rel} is stale"
    train = {p.name for p in (EXAMPLE / "tasks" / "train").iterdir()}
    held = {p.name for p in (EXAMPLE / "tasks" / "eval").iterdir()}
    assert len(train) == 48 and len(held) == 24 and not train & held


@pytest.mark.slow
@pytest.mark.container
@pytest.mark.timeout(1500)
def test_a_short_run_of_the_example_trains_in_containers(tmp_path: Path) -> None:
    try:
        engine = find_engine("auto")
    except EngineUnavailable as exc:
        pytest.skip(f"no container engine: {exc}")
    example = tomllib.loads((EXAMPLE / "config.toml").read_text())
    sections = {**example,
                "run": {**example["run"], "dir": str(tmp_path / "run"), "steps": 2, "tasks_per_step": 2,
                        "eval_tasks": 4, "max_attempts_per_step": 16, "eval_at_start": False},
                "tasks": {"train": str(EXAMPLE / "tasks" / "train"), "eval": str(EXAMPLE / "tasks" / "eval")},
                "runner": {**example["runner"], "command": ["python", str(EXAMPLE / "agent.py")], "concurrency": 8}}
    config_path = write_run_config(tmp_path / "cfg", sections)
    done = subprocess.run([str(Path(sys.executable).parent / "harnessrl"), "train", str(config_path)],
                          capture_output=True, text=True, timeout=1400)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "held-out reward" in done.stdout + done.stderr
    config = load_config(config_path)
    store = open_store(config.store_url)
    rollouts = store.list_rollouts(limit=1000)
    assert len(rollouts) >= 8 + 4
    for r in rollouts:
        assert r.failure_kind is not FailureKind.INFRA, (r.id, r.error)
        calls = store.get_calls(r.id)
        assert calls and all(c.completion_token_ids and c.prompt_token_ids for c in calls)
        names = {rw.name for rw in store.get_rewards(r.id)}
        assert {"verifier", "final"} <= names  # graded by the task's tests in a clean container
    left = asyncio.run(engine.run("ps", "-a", "--filter", f"label={LABEL_RUN}", "--format",
                                  "{{index .Labels \"harnessrl.run\"}}")).text.split()
    assert not {r.run_id for r in rollouts} & set(left)  # the run removed every container it made
