"""Grading a SWE-bench attempt by the official ``swebench`` package's rule: reward 1 iff resolved.

The attempt's changes are the repository in the workdir (``/testbed``) once the harness has exited; they
stand where swebench's harness puts the model's patch. What follows is swebench's own evaluation: its
instance's ``eval_script`` (through ``make_test_spec``, which adds the test command's exit-status line)
runs in the container and resets the test files, applies the ``test_patch`` and runs the tests; the log is
then read by ``get_eval_report`` (the instance's log parser, the markers, the exit-status check,
``get_eval_tests_report`` and ``get_resolution_status``). Nothing of that rule is written again here.

What is harnessrl's: an attempt that changed nothing scores 0 without a test run (swebench leaves an
empty patch out of a run, unresolved); a test patch that does not apply is a grading failure (``value``
None: the task is broken, not the attempt); tests past ``timeout_s`` score 0 (the agent's code may hang);
a log swebench classifies as an environment fault (out of memory, no network, ...) is a grading failure.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harnessrl.environments.grade import Box, Grade
from harnessrl.environments.task_env import TaskEnvironment
from harnessrl.swebench.eval_script import TestPatchError, reset_test_files
from harnessrl.swebench.load import WORKDIR

#: Where the grader's files go in the container (the test patch, the eval script, the test log).
GRADE_DIR = "/tmp/harnessrl-swebench"
#: The most of the test log read back: swebench parses all of it, so it is read from a file, not an
#: exec's output tail; a log past this is a grading failure rather than a misread.
LOG_LIMIT_BYTES = 64 << 20
#: How much of the log a Grade keeps as its output (the end, where the test summary is).
OUTPUT_TAIL_CHARS = 8000
#: Git must not refuse a repository another user owns (a harness run as a user): safe.directory=* for
#: every git command of the grader's own steps (git >= 2.31 reads config from the environment).
GIT_ENV = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
#: The short commands' limit (git status, the patch check).
STEP_TIMEOUT_S = 120.0


async def grade_swebench(box: Box, env: TaskEnvironment, *, timeout_s: float) -> Grade:
    """Grade the repository in ``box`` against the instance in ``env.grader_input`` (``load.py``)."""
    instance = dict(env.grader_input)
    workdir = env.workdir or WORKDIR
    try:
        from swebench.harness.utils import make_test_spec

        spec = make_test_spec(instance)
        reset = reset_test_files(instance["base_commit"], instance["test_patch"])
    except ImportError:
        return Grade(None, "", "SWE-bench grading needs the swebench package: pip install 'harnessrl[swebench]'")
    except (KeyError, TestPatchError, ValueError) as exc:
        return Grade(None, "", f"SWE-bench instance {env.name}: malformed grader input ({exc!r})")

    base = shlex.quote(instance["base_commit"])
    changed = await box.exec(["bash", "-c", f"git diff --quiet {base} -- && "
                              "test -z \"$(git ls-files --others --exclude-standard)\""],
                             timeout_s=STEP_TIMEOUT_S, workdir=workdir, env=GIT_ENV)
    if changed.exit_code == 0:
        return Grade(0.0, "the attempt left the repository as it was at the base commit: not resolved")
    if changed.exit_code != 1:
        return Grade(None, changed.output, f"cannot compare {workdir} with base commit {instance['base_commit']}")

    with tempfile.TemporaryDirectory(prefix="harnessrl-swebench-") as tmp:
        Path(tmp, "test.patch").write_text(instance["test_patch"])
        Path(tmp, "eval.sh").write_text(spec.eval_script)
        await box.put(Path(tmp), GRADE_DIR)
    check = await box.exec(["bash", "-c", f"set -e\n{reset}\ngit apply --check {GRADE_DIR}/test.patch"],
                           timeout_s=STEP_TIMEOUT_S, workdir=workdir, env=GIT_ENV)
    if check.exit_code != 0:
        return Grade(None, check.output, f"the test_patch of {env.name} does not apply to the attempt's repository")

    log_path = f"{GRADE_DIR}/test_output.txt"
    run = await box.exec(["bash", "-c", f"/bin/bash {GRADE_DIR}/eval.sh > {log_path} 2>&1"],
                         timeout_s=timeout_s, workdir=workdir)
    log_bytes = await box.read(log_path, LOG_LIMIT_BYTES + 1)
    log = (log_bytes or b"").decode("utf-8", errors="replace")
    if run.timed_out:
        return Grade(0.0, f"tests timed out after {timeout_s:g} s: not resolved\n{_tail(log)}")
    if log_bytes is None:
        return Grade(None, run.output, f"the eval script of {env.name} wrote no log")
    if len(log_bytes) > LOG_LIMIT_BYTES:
        return Grade(None, _tail(log), f"the test log of {env.name} is over {LOG_LIMIT_BYTES} bytes")
    return decide(spec, log)


def decide(spec: Any, log: str) -> Grade:
    """The grade of a finished test log, by swebench's ``get_eval_report`` (``spec``: its ``TestSpec``)."""
    from swebench.harness.grading import get_eval_report

    with tempfile.TemporaryDirectory(prefix="harnessrl-swebench-") as tmp:
        log_file = Path(tmp, "test_output.txt")
        log_file.write_text(log, encoding="utf-8")
        # model_patch: only whether there is one counts; the changes are already in the repository.
        prediction = {"instance_id": spec.instance_id, "model_name_or_path": "harnessrl",
                      "model_patch": "(the attempt's changes in the workdir)"}
        report: Mapping[str, Any] = get_eval_report(spec, prediction, str(log_file),
                                                    include_tests_status=True)[spec.instance_id]
    summary = _summary(report)
    if report.get("infra_failure"):
        return Grade(None, f"{summary}\n{_tail(log)}",
                     f"swebench classifies the test log as an environment fault: {report.get('infra_failure_reason')}")
    return Grade(1.0 if report["resolved"] else 0.0, f"{summary}\n{_tail(log)}")


def _summary(report: Mapping[str, Any]) -> str:
    """One line per test list: which of ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` failed (swebench's report)."""
    lines = [f"swebench: resolved={report['resolved']} tests_ran={report['patch_successfully_applied']}"]
    for key, outcome in (report.get("tests_status") or {}).items():
        if outcome["success"] or outcome["failure"]:
            lines.append(f"{key}: {len(outcome['success'])} passed, failed: {json.dumps(outcome['failure'])}")
    return "\n".join(lines)


def _tail(log: str) -> str:
    return log[-OUTPUT_TAIL_CHARS:]
