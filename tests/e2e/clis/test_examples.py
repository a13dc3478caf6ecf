"""The examples/<cli> folders as a user runs them: each config loads, names files that exist and the CLIs'
folder for the sandbox; its tasks (greet to train, farewell held out) are real bugs (the verifier scores the shipped repository 0 and the fix
1); and `harnessrl collect` on examples/codex/config.toml, with only the engine swapped for the scripted
one, runs Codex on the held-out task through the controller, sandboxed runner and verifier to a reward of 1.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect
from harnessrl.store import open_store

from ._harness import CLIS_BIN, EXAMPLES, ROOT, require_cli

sys.path.insert(0, str(ROOT / "tests"))
from fakes.cli_engine import CliScriptEngine  # noqa: E402
from fakes.fake_engine import EngineServer  # noqa: E402

CLIS = ["claude-code", "codex", "opencode", "gemini-cli", "qwen-code", "cline", "kilo", "continue", "pi", "copilot"]


FIXES = {"greet": ("greet.py", 'return "Hello " + name', 'return f"Hello, {name}!"'),
         "farewell": ("farewell.py", 'return "Bye " + name', 'return f"Goodbye, {name}."')}


@pytest.mark.parametrize("example", CLIS)
@pytest.mark.parametrize("task", sorted(FIXES))
def test_example_config_and_task(example: str, task: str, tmp_path: Path) -> None:
    config = load_config(EXAMPLES / example / "config.toml")
    assert Path(config.runner.command[1]).is_file() and Path(config.rewards.verifier[1]).is_file()
    assert config.runner.sandbox_read_only == [str((ROOT / ".clis").resolve())]
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / example / "tasks" / task / "repo", repo)

    def reward() -> float:
        out = subprocess.run([sys.executable, config.rewards.verifier[1]], cwd=repo, capture_output=True,
                             text=True, check=True)
        return float(out.stdout.split()[-1])

    assert reward() == 0.0
    name, old, new = FIXES[task]
    (repo / name).write_text((repo / name).read_text().replace(old, new))
    assert reward() == 1.0


@pytest.mark.slow
def test_collect_runs_the_codex_example(tmp_path: Path) -> None:
    require_cli("codex")
    engine = CliScriptEngine([
        {"tool": "exec_command", "arguments": {"cmd": "sed -i 's/\"Bye \" + name/f\"Goodbye, {name}.\"/' farewell.py"}},
        {"text": "Fixed."},
    ], model="policy")
    server = EngineServer(engine).start()
    try:
        config = load_config(EXAMPLES / "codex" / "config.toml", {
            "engine": {"kind": "openai", "urls": [server.url]},
            "gateway": {"render_mode": "engine"},
            "run": {"dir": str(tmp_path / "run")},
            "runner": {"env": {"CLIS_BIN": str(CLIS_BIN)}, "concurrency": 1},
        })
        result = run_collect(config, None)
    finally:
        server.stop()
    assert result.tasks == 1 and result.mean_reward == 1.0
    store = open_store(config.store_url)
    (rollout,) = store.list_rollouts(limit=10)
    calls = store.get_calls(rollout.id)
    assert len(calls) == 2 and all(c.completion_token_ids for c in calls)
    store.close()
