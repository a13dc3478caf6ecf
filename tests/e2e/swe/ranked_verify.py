"""Test verifier for a training group with reward variance: the real ``examples/swe/verify.py`` reward,
plus 1.0 for the first attempt of the run to be verified (arrival order, claimed with an exclusive file
create in ``RANKED_VERIFY_DIR``).

Why: the tiny random test policy never fixes a bug, so every attempt scores 0, and a group whose rewards
are all equal carries no advantage (it is dropped): no gradient would ever reach the trainer. The bonus
is arbitrary on purpose; what the test checks is the plumbing from mini's recorded calls to an update.
"""

import os
import subprocess
import sys
from pathlib import Path

VERIFY = Path(__file__).resolve().parents[3] / "examples" / "swe" / "verify.py"


def main() -> None:
    proc = subprocess.run([sys.executable, str(VERIFY)], capture_output=True, text=True, check=False)
    sys.stderr.write(proc.stderr[-4000:])
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    real = float(proc.stdout.strip().splitlines()[-1])
    marker = Path(os.environ.get("RANKED_VERIFY_DIR", Path(__file__).parent)) / "first-verified"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        bonus = 1.0
    except FileExistsError:
        bonus = 0.0
    print(real + bonus)


if __name__ == "__main__":
    main()
