"""Verifier of the chores: 1.0 when the visible and the hidden tests pass, else 0.

Runs after the agent has exited, in the attempt's workspace, with ``hidden/tests/test_chore.py`` copied
into ``tests/``; harnessrl has already checked that no protected test file changed (else reward 0,
``tamper``). The task's verifier input (kind, name, entries to keep) reaches the hidden test as
CHORE_JSON. Contract: exit 0 and print the reward on the last line of stdout.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

TIME_LIMIT_S = 60


def main() -> None:
    if not Path("tests/test_chore.py").is_file():  # the verifier's own inputs are wrong: infra, not a 0
        sys.exit("hidden test tests/test_chore.py missing from the workspace")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSRL_")}
    env["CHORE_JSON"] = os.environ["HARNESSRL_VERIFIER_INPUT"]
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-p", "test_*.py"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S, env=env)
    except subprocess.TimeoutExpired:
        print(f"tests ran past {TIME_LIMIT_S}s", file=sys.stderr)
        print(0.0)
        return
    sys.stderr.write(proc.stderr[-4000:])
    ran = re.search(r"^Ran (\d+) tests?", proc.stderr, re.M)
    print(1.0 if proc.returncode == 0 and ran and int(ran.group(1)) >= 3 else 0.0)


main()
