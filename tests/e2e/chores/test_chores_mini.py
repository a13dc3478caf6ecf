"""mini-swe-agent (unmodified CLI, the chores example's own mini.yaml) walked through a chore by a scripted
engine, via ``harnessrl collect``: a failing command gets its return code back, the right command runs in
the workspace, a reply without a ```bash block gets the config's format error, the hidden check gives 1.0.

What the untrained SmolLM2 shows only rarely: the text-based action format of the example's config,
parsed by mini itself (its ``litellm_textbased`` model class and the config's ``action_regex``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store

if importlib.util.find_spec("minisweagent") is None or shutil.which(
        "mini", path=str(Path(sys.executable).parent)) is None:
    pytest.skip("mini-swe-agent is not installed: pip install -e '.[harnesses]'", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable
from fakes.fake_engine import EngineServer  # noqa: E402
from fakes.scripted_engine import ScriptedEngine  # noqa: E402
from run_config import write_run_config  # noqa: E402

CHORES = Path(__file__).resolve().parents[3] / "examples" / "chores"
SCRIPT = [
    {"text": "THOUGHT: make it.\n\n```bash\nmkdir -r logs\n```"},  # mkdir has no -r: it fails
    {"text": "THOUGHT: without the flag.\n\n```bash\nmkdir logs\n```"},
    {"text": "I am done."},  # no ```bash block: a format error (mini drops this reply from its history)
]


def _task() -> dict:
    for line in (CHORES / "tasks" / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["id"] == "chore-mkdir-logs":
            record["workspace"], record["hidden_dir"] = str(CHORES / "repo"), str(CHORES / "hidden")
            return record
    raise KeyError("chore-mkdir-logs")


def test_mini_does_a_chore_with_the_examples_config(tmp_path: Path) -> None:
    engine = EngineServer(ScriptedEngine(SCRIPT, model="policy")).start()
    try:
        (tmp_path / "tasks.jsonl").write_text(json.dumps(_task()) + "\n")
        cfg = write_run_config(tmp_path, {
            "run": {"dir": str(tmp_path / "run")},
            "tasks": {"eval": "tasks.jsonl"},
            "engine": {"kind": "openai", "urls": [engine.url]},
            "gateway": {"render_mode": "engine"},
            "runner": {"command": ["bash", str(CHORES / "run_agent.sh")], "timeout_s": 240,
                       "keep_workdirs": "all"},
            "rewards": {"verifier": [sys.executable, str(CHORES / "verify.py")]},
        })
        config = load_config(cfg)
        assert run_collect(config, None).mean_reward == 1.0
    finally:
        engine.stop()
    store = open_store(config.store_url)
    (rollout,) = store.list_rollouts(limit=10)
    calls = store.get_calls(rollout.id)
    assert len(calls) == 3  # the config's step_limit
    assert all(c.prompt_token_ids and c.completion_token_ids for c in calls)
    sent = calls[-1].request["messages"]
    assert sent[1]["content"].startswith("Please solve this issue: Create a directory named logs")
    # mini's observations, rendered from the example's templates: the failed command, then the right one
    assert "<returncode>1</returncode>" in sent[3]["content"] and "invalid option" in sent[3]["content"]
    assert "<returncode>0</returncode>" in sent[5]["content"]
    workdir = config.run_dir / "attempts" / rollout.id / "workspace"
    assert (workdir / "logs").is_dir()
    traj = json.loads((workdir / ".mswea" / "traj.json").read_text())
    assert traj["info"]["exit_status"] == "LimitsExceeded"
    assert "Format error" in traj["messages"][-2]["content"]
    # learned.py reads the same store: one held-out attempt, solved; two of three calls parsed, names as NAME
    sys.path.insert(0, str(CHORES))
    from learned import phases

    (phase,) = phases(store)
    assert (phase.name, phase.attempts, phase.solved, phase.calls, phase.parsed) == ("eval v0", 1, 1, 3, 2)
    assert phase.commands == {"mkdir -r NAME": 1, "mkdir NAME": 1}
    store.close()
