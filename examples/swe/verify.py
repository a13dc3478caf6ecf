"""Verifier for the swe tasks: 1.0 when every test passes (the hidden ones included), else 0.

It runs after the agent has exited, in the attempt's working directory, with the task's hidden tests
already copied into ``tests/``. harnessrl has checked the protected test files before calling it (a
changed, deleted or added test file gives reward 0 without running this). The tests run in a child
process with a time limit: the agent's code may loop forever, and that must cost it the reward, not
hang the run. Contract: exit 0 and print the reward on the last line of stdout.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

TIME_LIMIT_S = 60


def hidden_test_files() -> list[str]:
    hidden = Path(os.environ.get("HARNESSRL_HIDDEN_DIR", ""))
    return sorted(p.name for p in hidden.rglob("test_*.py")) if hidden.is_dir() else []


def main() -> None:
    expected = hidden_test_files()
    missing = [name for name in expected if not any(Path("tests").rglob(name))]
    if not expected or missing:  # the verifier's own inputs are wrong: an infra failure, not a 0
        sys.exit(f"hidden tests missing from the workspace: {missing or 'none configured'}")
    cmd = [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-p", "test_*.py"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSRL_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S, env=env)
    except subprocess.TimeoutExpired:
        print(f"tests ran past {TIME_LIMIT_S}s", file=sys.stderr)
        print(0.0)
        return
    sys.stderr.write(proc.stderr[-4000:])
    ran = re.search(r"^Ran (\d+) tests?", proc.stderr, re.M)
    print(1.0 if proc.returncode == 0 and ran and int(ran.group(1)) > 0 else 0.0)


main()
