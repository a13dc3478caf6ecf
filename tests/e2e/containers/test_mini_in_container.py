"""A real coding harness inside its task's container: mini-swe-agent (its `mini` CLI, unmodified, from this
venv mounted read-only) works on a Harbor task whose Dockerfile builds its repository, through the gateway,
and the task's tests grade it in a clean container. The engine is scripted (a bad command, then the right one),
so the test checks the plumbing, not a model."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.environments.engine import EngineUnavailable, find_engine
from harnessrl.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable
from fakes.fake_engine import EngineServer  # noqa: E402
from fakes.scripted_engine import ScriptedEngine  # noqa: E402
from run_config import write_run_config  # noqa: E402

MINI_YAML = Path(__file__).resolve().parents[3] / "examples" / "chores" / "mini.yaml"
SCRIPT = [
    {"text": "THOUGHT: make it.\n\n```bash\nmkdir -r logs\n```"},  # mkdir has no -r: it fails
    {"text": "THOUGHT: without the flag.\n\n```bash\nmkdir logs && ls\n```"},
    {"text": "I am done."},
]
RUN_MINI = """#!/usr/bin/env bash
# mini-swe-agent as a Harbor harness: the instruction as its task, offline and non-interactive switches.
set -euo pipefail
export MSWEA_CONFIGURED=true MSWEA_COST_TRACKING=ignore_errors MSWEA_SILENT_STARTUP=1
export LITELLM_LOCAL_MODEL_COST_MAP=True MSWEA_GLOBAL_CONFIG_DIR=/tmp/.mswea
exec mini -m "openai/${HARNESSRL_MODEL:-policy}" -t "$HARNESSRL_TASK_INSTRUCTION" -y --exit-immediately \\
    -c "$(dirname "$0")/mini.yaml" -o /tmp/.mswea/traj.json </dev/null
"""


@pytest.mark.slow
@pytest.mark.container
@pytest.mark.timeout(900)
def test_mini_swe_agent_works_inside_the_tasks_container(tmp_path: Path) -> None:
    try:
        find_engine("auto")
    except EngineUnavailable as exc:
        pytest.skip(f"no container engine: {exc}")
    if shutil.which("mini", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mini-swe-agent is not installed: pip install -e '.[harnesses]'")
    task = tmp_path / "tasks" / "make-logs"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY app.py /app/\n")
    (task / "environment" / "app.py").write_text("print('hello')\n")
    (task / "instruction.md").write_text("Create a directory named logs in /app.\n")
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif [ -d /app/logs ] && [ -f /app/app.py ]; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n")
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "run_mini.sh").write_text(RUN_MINI)
    shutil.copy(MINI_YAML, harness / "mini.yaml")
    engine = EngineServer(ScriptedEngine(SCRIPT, model="policy")).start()
    try:
        cfg = write_run_config(tmp_path / "cfg", {
            "run": {"dir": str(tmp_path / "run")},
            "tasks": {"eval": str(tmp_path / "tasks")},
            "engine": {"kind": "openai", "urls": [engine.url]},
            "gateway": {"render_mode": "engine"},
            "runner": {"command": ["bash", str(harness / "run_mini.sh")], "timeout_s": 300,
                       "environment": "container", "container": {"grading": "clean"}},
        })
        config = load_config(cfg)
        assert run_collect(config, None).mean_reward == 1.0
    finally:
        engine.stop()
    store = open_store(config.store_url)
    (rollout,) = store.list_rollouts(limit=10)
    calls = store.get_calls(rollout.id)
    assert len(calls) == 3 and all(c.prompt_token_ids and c.completion_token_ids for c in calls)
    sent = calls[-1].request["messages"]
    assert "<returncode>1</returncode>" in sent[3]["content"]  # mkdir -r failed, in the container's coreutils
    assert "<returncode>0</returncode>" in sent[5]["content"] and "app.py" in sent[5]["content"]  # ls of /app
    assert {r.name for r in store.get_rewards(rollout.id)} >= {"verifier", "final"}
    store.close()
