"""The eval tests' verifier: what a task's reference says decides its reward, and some verifiers fail (infra).

``kind`` in the task's reference: ``solved`` (1 if the harness answered "right"), ``unsolved`` (0), ``flaky``
(the verifier fails the first time per task and harness, then scores as ``solved``), ``broken`` (always fails:
the task ends unscored). The count of verifier runs is kept in the folder given as the first argument.
"""

import json
import os
import sys
from pathlib import Path

kind = json.loads(os.environ["HARNESSRL_VERIFIER_INPUT"])["kind"]
answer = Path("answer.txt").read_text() if Path("answer.txt").exists() else ""
state = Path(sys.argv[1])
if kind == "broken":
    sys.exit("verifier crashed")
if kind == "flaky":
    marker = state / f"{os.environ['HARNESSRL_TASK_ID']}-{answer}"
    if not marker.exists():
        marker.write_text("failed once")
        sys.exit("verifier crashed once")
print(1.0 if kind != "unsolved" and answer == "right" else 0.0)
