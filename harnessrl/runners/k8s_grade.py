"""Reading a task pod's verifier log back: the harness's status, the tests' end, and the reward (``Grade``).

The verifier (``k8s_task_pod.verifier_script``) marks its report lines with a nonce the harness never
sees (it lives in the Job's annotations and the verifier's command; the harness has no API token). The
reward follows Harbor's rules exactly: the printed reward files are written to a temporary folder and
read by ``harbor.verify.read_reward``, the function local grading uses.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harnessrl.environments.grade import Grade
from harnessrl.environments.reward_file import RewardFileError, read_reward

_STATUS = re.compile(r"exit=(\d+) timed_out=([01])")


@dataclass(frozen=True, slots=True)
class VerifierReport:
    """What the verifier's log says. ``harness_exit`` None: the harness wrote no status (it never ended)."""

    harness_exit: int | None = None
    harness_timed_out: bool = False
    tests_ended: bool = False
    tests_timed_out: bool = False
    done: bool = False
    files: dict[str, str] = field(default_factory=dict)
    #: The tests' own output (the log without the report lines).
    output: str = ""


def parse_report(log: str, nonce: str) -> VerifierReport:
    """The report in ``log``. Only lines after the tests' end line count for reward files and ``done``,
    so output of the tests (which run the agent's code) cannot stand in for them."""
    mark = f"harnessrl-{nonce} "
    lines = log.splitlines()
    harness_exit, harness_timed_out = None, False
    ended_at = -1
    tests_timed_out = False
    output: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith(mark + "harness ") and harness_exit is None and ended_at < 0:
            m = _STATUS.match(line[len(mark) + 8:].strip())
            if m:
                harness_exit, harness_timed_out = int(m[1]), m[2] == "1"
        elif line.startswith(mark + "tests "):
            m = _STATUS.fullmatch(line[len(mark) + 6:].strip())
            if m:
                ended_at, tests_timed_out = i, m[2] == "1"
    files: dict[str, str] = {}
    done = False
    if ended_at >= 0:
        current: str | None = None
        body: list[str] = []
        for line in lines[ended_at + 1:]:
            if current is not None:
                if line == mark + "end":
                    files[current] = "\n".join(body)
                    current, body = None, []
                else:
                    body.append(line)
            elif line.startswith(mark + "harness "):  # again after the tests: the first may be out of the tail
                m = _STATUS.match(line[len(mark) + 8:].strip())
                if m:
                    harness_exit, harness_timed_out = int(m[1]), m[2] == "1"
            elif line.startswith(mark + "file "):
                current = line[len(mark) + 5:].strip()
            elif line == mark + "done":
                done = True
    for line in lines[: ended_at if ended_at >= 0 else len(lines)]:
        if not line.startswith(mark):
            output.append(line)
    return VerifierReport(
        harness_exit=harness_exit,
        harness_timed_out=harness_timed_out,
        tests_ended=ended_at >= 0,
        tests_timed_out=tests_timed_out,
        done=done,
        files=files,
        output="\n".join(output),
    )


def grade(report: VerifierReport, *, tests_timeout_s: float, why_unfinished: str, max_bytes: int) -> Grade:
    """The reward by Harbor's rules: past the tests' timeout 0; no (valid) reward file is a grading failure.

    ``why_unfinished`` names what ended the verifier when its report stops before the tests' end."""
    output = report.output[-max_bytes:] if max_bytes else ""
    if not report.tests_ended:
        return Grade(None, output, f"the verifier did not finish the tests: {why_unfinished}")
    if report.tests_timed_out:
        return Grade(0.0, f"{output}\nharnessrl: the tests ran past their timeout of {tests_timeout_s:g}s: 0")
    if not report.done:
        return Grade(None, output, f"the verifier's report was cut off after the tests: {why_unfinished}")
    with tempfile.TemporaryDirectory(prefix="harnessrl-reward-") as folder:
        for name in ("reward.json", "reward.txt"):
            if name in report.files:
                (Path(folder) / name).write_text(report.files[name])
        try:
            value, _ = read_reward(Path(folder))
        except RewardFileError as exc:
            return Grade(None, output, str(exc))
    return Grade(value, output)
