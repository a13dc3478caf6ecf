"""The verifier of a Harbor task: runs its ``tests/test.sh`` and prints the reward it wrote.

Run by scoring (``rewards/verifier.py``) as ``python -I -m harnessrl.harbor.verify`` in the attempt's
workspace, in the harness's sandbox when it had one, after the task's ``tests/`` were copied in (hidden
files). Harbor's container paths become folders of this run: ``/tests`` a private copy of the tests,
``/logs/verifier`` (where ``reward.txt``/``reward.json`` go), ``/logs/agent``, ``/logs/artifacts`` folders
of a fresh temporary directory, and the Dockerfile's ``WORKDIR`` the workspace (``paths.py``).

Reward, as Harbor reads it: ``reward.json`` (an object of numbers; its ``reward`` key, else its only number,
else ``reward.txt``) before ``reward.txt`` (one number). Harbor ignores ``test.sh``'s exit status, and so
does this. No reward file, or an unreadable one, is a verifier failure (exit 1: an infra failure by default,
the agent is not scored on a broken test). Tests that run past the task's ``[verifier] timeout_sec`` score
0: the agent's code may hang them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harnessrl.environments.reward_file import RewardFileError, read_reward
from harnessrl.harbor.paths import AGENT_LOGS, ARTIFACTS, LOGS, TESTS, VERIFIER_LOGS, rewrite_tree

__all__ = ["RewardFileError", "read_reward", "resolve_env"]

_TAIL = 6000
_MARGIN_S = 3.0  # stop the tests this long before scoring's own limit, to say why


def resolve_env(values: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Harbor's ``${VAR}`` and ``${VAR:-default}`` in task.toml env values, from ``env``."""
    def one(m: re.Match[str]) -> str:
        return env.get(m.group(1)) or (m.group(3) or "")
    return {k: re.sub(r"\$\{(\w+)(:-([^}]*))?\}", one, v) for k, v in values.items()}


def _spec() -> dict[str, Any]:
    text = os.environ.get("HARNESSRL_VERIFIER_INPUT")
    if text is None and os.environ.get("HARNESSRL_VERIFIER_INPUT_FILE"):
        text = Path(os.environ["HARNESSRL_VERIFIER_INPUT_FILE"]).read_text()
    spec = json.loads(text or "{}").get("harbor")
    if not isinstance(spec, dict):
        raise SystemExit("harnessrl.harbor.verify: no Harbor task in the verifier input (it scores tasks loaded "
                         "from a Harbor task folder)")
    return spec


def _run_tests(test_sh: Path, cwd: Path, env: dict[str, str], out: Path, timeout_s: float) -> tuple[int | None, float]:
    """Run ``bash test.sh`` (stdout and stderr to ``out``, as Harbor does) in its own process group;
    returns (exit status, None when stopped at the timeout; seconds)."""
    started = time.monotonic()
    with out.open("wb") as sink:
        proc = subprocess.Popen(["bash", str(test_sh)], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        try:  # whatever the tests started in the background goes with them
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return code, time.monotonic() - started


def main() -> int:
    spec = _spec()
    hidden_root = Path(os.environ.get("HARNESSRL_HIDDEN_DIR", "."))
    tests_in = hidden_root / str(spec["tests"])
    if not (tests_in / "test.sh").is_file():
        print(f"harbor: tests/test.sh did not reach the workspace ({tests_in})", file=sys.stderr)
        return 1
    workspace = Path.cwd()
    print(f"harbor task {spec['task']}: {spec['note']}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="harbor-") as tmp:
        root = Path(tmp)
        tests, logs = root / "tests", root / "logs"
        shutil.copytree(tests_in, tests, symlinks=True)
        shutil.rmtree(hidden_root / str(spec["tests"]).split("/")[0], ignore_errors=True)  # workspace as left
        mapping = {TESTS: str(tests), LOGS: str(logs), VERIFIER_LOGS: str(logs / "verifier"),
                   AGENT_LOGS: str(logs / "agent"), ARTIFACTS: str(logs / "artifacts")}
        for folder in mapping.values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        if spec.get("workdir"):
            mapping[str(spec["workdir"])] = str(workspace)
        rewrite_tree(tests, mapping)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSRL_")}
        env.update(resolve_env(spec.get("env") or {}, os.environ))
        task_limit = float(spec["timeout_sec"])
        limit = min(task_limit, float(spec.get("outer_timeout_s") or task_limit) - _MARGIN_S)
        output = logs / "verifier" / "test-stdout.txt"
        code, took = _run_tests(tests / "test.sh", workspace, env, output, max(limit, 1.0))
        text = output.read_text(errors="replace")
        print(f"--- tests/test.sh (exit {code}, {took:.1f}s) ---\n{text[-_TAIL:]}", file=sys.stderr)
        if code is None:
            if limit < task_limit:
                print(f"harbor: tests ran past [rewards] verifier_timeout_s before the task's own [verifier] "
                      f"timeout_sec = {task_limit:g}s; raise verifier_timeout_s", file=sys.stderr)
                return 1
            print(f"harbor: tests ran past the task's [verifier] timeout_sec = {task_limit:g}s: reward 0",
                  file=sys.stderr)
            print(0.0)
            return 0
        try:
            reward, numbers = read_reward(logs / "verifier")
        except RewardFileError as exc:
            print(f"harbor: {exc}", file=sys.stderr)
            return 1
    if len(numbers) > 1:
        print(f"harbor: reward.json {json.dumps(numbers)}", file=sys.stderr)
    print(reward)
    return 0


if __name__ == "__main__":
    sys.exit(main())
