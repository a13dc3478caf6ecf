"""mini-swe-agent (unmodified CLI) walked through a successful fix by a scripted engine, via ``harnessrl
collect``: its `bash` tool calls are parsed by mini and executed in the workspace, their observations
come back to the engine, the bug is fixed, mini submits, the verifier gives 1.0, and every call is
recorded with tokens, the later ones token-exact extensions of the earlier ones.

What SmolLM2 cannot show (it hardly ever emits mini's tool call): the positive path of the real harness.
The gateway runs in render mode "engine" here (the scripted engine applies its own template).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store
from harnessrl.types import Fidelity, RolloutStatus

if importlib.util.find_spec("minisweagent") is None or shutil.which(
        "mini", path=str(Path(sys.executable).parent)) is None:
    pytest.skip("mini-swe-agent is not installed: pip install -e '.[harnesses]'", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable
from fakes.fake_engine import EngineServer  # noqa: E402
from fakes.scripted_engine import ScriptedEngine  # noqa: E402
from run_config import write_run_config  # noqa: E402

from ._tasks import SWE, swe_task  # noqa: E402

FIX = "sed -i 's/words = title.split(\" \")/words = title.lower().split()/' textkit.py"
SCRIPT = [
    {"tool": "bash", "arguments": {"command": "cat textkit.py"}},
    {"tool": "bash", "arguments": {"command": FIX + " && python -m unittest discover -s tests"}},
    {"tool": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}},
]


@pytest.fixture
def engine() -> Iterator[EngineServer]:
    server = EngineServer(ScriptedEngine(SCRIPT, model="policy")).start()
    yield server
    server.stop()


def test_mini_fixes_the_bug_through_the_gateway(tmp_path: Path, engine: EngineServer) -> None:
    record = swe_task("swe-slugify")
    (tmp_path / "tasks.jsonl").write_text(json.dumps(record) + "\n")
    cfg = write_run_config(tmp_path, {
        "run": {"dir": str(tmp_path / "run")},
        "tasks": {"eval": "tasks.jsonl"},
        "engine": {"kind": "openai", "urls": [engine.url]},
        "gateway": {"render_mode": "engine"},
        "runner": {"command": ["bash", str(SWE / "run_agent.sh")], "timeout_s": 240, "keep_workdirs": "all",
                   "env": {"SWE_STEP_LIMIT": "6"}},
        "rewards": {"verifier": [sys.executable, str(SWE / "verify.py")]},
    })
    config = load_config(cfg)
    assert run_collect(config, None).mean_reward == 1.0
    store = open_store(config.store_url)
    (rollout,) = store.list_rollouts(limit=10)
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.exit_code == 0
    assert {r.name: r.value for r in store.get_rewards(rollout.id)} == {"verifier": 1.0, "final": 1.0}
    calls = store.get_calls(rollout.id)
    assert len(calls) == len(SCRIPT)
    assert all(c.prompt_token_ids and c.completion_token_ids for c in calls)
    assert [c.fidelity for c in calls] == [Fidelity.RERENDERED, Fidelity.EXTENDED, Fidelity.EXTENDED]
    # mini parsed each tool call, ran it in the workspace and sent the observation back as a tool message
    last = calls[-1].request["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_0_0", "call_1_0"]
    assert "def slugify" in tool_msgs[0]["content"] and "OK" in tool_msgs[1]["content"]
    workdir = config.run_dir / "attempts" / rollout.id / "workspace"
    assert "title.lower().split()" in (workdir / "textkit.py").read_text()
    traj = json.loads((workdir / "traj.json").read_text())
    assert traj["info"]["model_stats"]["api_calls"] == len(SCRIPT)
    assert traj["info"]["exit_status"] == "Submitted"
    store.close()
