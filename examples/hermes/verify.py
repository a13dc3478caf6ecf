"""Verifier of the coding-CLI examples: 1.0 when the repository's tests pass after the agent exited.

harnessrl has already checked that test_*.py is unchanged (the task's "protected" globs; a change scores 0
as tamper). The tests run in a child process with a time limit, so code that loops costs the reward
instead of hanging the run. Contract: exit 0 and print the reward on the last line of stdout.
"""

import os
import re
import subprocess
import sys

TIME_LIMIT_S = 60


def main() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSRL_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "unittest", "discover", "-p", "test_*.py"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        print(f"tests ran past {TIME_LIMIT_S}s", file=sys.stderr)
        print(0.0)
        return
    sys.stderr.write(proc.stderr[-4000:])
    ran = re.search(r"^Ran (\d+) tests?", proc.stderr, re.M)
    print(1.0 if proc.returncode == 0 and ran and int(ran.group(1)) > 0 else 0.0)


if __name__ == "__main__":
    main()
