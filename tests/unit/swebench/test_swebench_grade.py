"""The grade of a SWE-bench attempt, without a container: swebench's decision on captured test logs
(``decide``), and ``grade_swebench``'s steps against a scripted Box (what it runs, and each way out)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from swebench.harness.utils import make_test_spec

from harnessrl.environments.grade import ExecResult
from harnessrl.environments.task_env import TaskEnvironment
from harnessrl.swebench.grade import GRADE_DIR, decide, grade_swebench
from harnessrl.swebench.load import load_swebench_tasks

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "swebench" / "instances.jsonl"
FIXTURE = ROOT / "tests" / "fixtures" / "swebench_instances.jsonl"
START, END = "+ : '>>>>> Start Test Output'", "+ : '>>>>> End Test Output'"


def statskit() -> TaskEnvironment:
    return load_swebench_tasks(EXAMPLE)[0].environment


def unittest_log(results: dict[str, str], exit_code: int) -> str:
    """What the example's eval script prints (``set -x`` traces, unittest -v lines, the exit-status line)."""
    lines = [f"{name} (tests.test_stats.StatsTest.{name}) ... {status}" for name, status in results.items()]
    return "\n".join(["+ cd /testbed", "+ git apply -v -", "Applied patch tests/test_stats.py cleanly.", START,
                      "+ python3 -m unittest -v tests/test_stats.py", *lines, "", "Ran 3 tests in 0.001s", "",
                      "OK" if exit_code == 0 else "FAILED (failures=1)", f"+ SWEBENCH_TEST_EXIT_CODE={exit_code}",
                      END, f"+ echo '>>>>> Test Exit Code: {exit_code}'", f">>>>> Test Exit Code: {exit_code}"])


GOLD_LOG = unittest_log({"test_mean": "ok", "test_median_even": "ok", "test_median_odd": "ok"}, 0)
BAD_LOG = unittest_log({"test_mean": "ok", "test_median_even": "ok", "test_median_odd": "FAIL"}, 1)
BASE_LOG = unittest_log({"test_mean": "ok", "test_median_even": "FAIL", "test_median_odd": "ok"}, 1)


def spec(env: TaskEnvironment):
    return make_test_spec(dict(env.grader_input))


def test_resolved_only_when_fail_to_pass_passes_and_pass_to_pass_holds():
    env = statskit()
    assert decide(spec(env), GOLD_LOG).value == 1.0
    base = decide(spec(env), BASE_LOG)
    assert base.value == 0.0 and base.error is None
    assert 'FAIL_TO_PASS: 0 passed, failed: ["test_median_even (tests.test_stats.StatsTest.test_median_even)"]' \
        in base.output
    bad = decide(spec(env), BAD_LOG)  # fixes the issue, breaks an odd-length median: not resolved
    assert bad.value == 0.0
    assert 'PASS_TO_PASS: 1 passed, failed: ["test_median_odd (tests.test_stats.StatsTest.test_median_odd)"]' \
        in bad.output


def test_swebench_rules_on_logs_that_do_not_describe_a_run():
    env = statskit()
    cut = GOLD_LOG.split(END)[0]  # the end marker never printed
    assert decide(spec(env), cut).value == 0.0
    # "ok" lines printed by the patch itself while the test command failed: swebench's exit-status check
    forged = GOLD_LOG.replace("EXIT_CODE=0", "EXIT_CODE=1").replace("Exit Code: 0", "Exit Code: 1")
    assert decide(spec(env), forged).value == 0.0
    assert decide(spec(env), GOLD_LOG.replace(START, "+ : '>>>>> Patch Apply Failed'")).value == 0.0


def test_an_environment_fault_is_a_grading_failure():
    log = "+ pip install -e .\nCould not resolve host: pypi.org\n"
    grade = decide(spec(statskit()), log)
    assert grade.value is None and "network_unreachable" in (grade.error or "")


def test_the_pytest_parser_of_a_row_without_one():
    astropy = load_swebench_tasks(FIXTURE)[0].environment
    f2p, p2p = astropy.grader_input["FAIL_TO_PASS"], astropy.grader_input["PASS_TO_PASS"]

    def log(failed: str | None) -> str:
        lines = [f"{'FAILED' if t == failed else 'PASSED'} {t}" for t in [*f2p, *p2p]]
        code = 1 if failed else 0
        return "\n".join([START, "+ pytest -rA astropy/modeling/tests/test_separable.py",
                          "=========================== short test summary info ============================",
                          *lines, f"+ SWEBENCH_TEST_EXIT_CODE={code}", END, f">>>>> Test Exit Code: {code}"])

    assert decide(spec(astropy), log(None)).value == 1.0
    assert decide(spec(astropy), log(f2p[1])).value == 0.0
    assert decide(spec(astropy), log(p2p[0])).value == 0.0


@dataclass
class ScriptedBox:
    """A Box whose commands answer in turn from ``answers``; records what was run and put."""

    answers: list[ExecResult]
    log: bytes | None = None
    ran: list[str] = field(default_factory=list)
    put_files: dict[str, str] = field(default_factory=dict)

    async def exec(self, argv: list[str], *, timeout_s: float, workdir: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        assert workdir == "/testbed"
        self.ran.append(argv[-1])
        return self.answers.pop(0)

    async def put(self, source: Path, dest: str) -> None:
        self.put_files.update({f"{dest}/{p.name}": p.read_text() for p in source.iterdir()})

    async def read(self, path: str, limit_bytes: int = 1 << 20) -> bytes | None:
        assert path == f"{GRADE_DIR}/test_output.txt"
        return self.log


CHANGED, APPLIES, RAN = ExecResult(1, ""), ExecResult(0, ""), ExecResult(0, "")


def grade(box: ScriptedBox, env: TaskEnvironment | None = None):
    return asyncio.run(grade_swebench(box, env or statskit(), timeout_s=60))


def test_a_changed_repository_is_tested_with_swebench_own_eval_script():
    env = statskit()
    box = ScriptedBox([CHANGED, APPLIES, RAN], log=GOLD_LOG.encode())
    assert grade(box, env).value == 1.0
    assert box.put_files[f"{GRADE_DIR}/eval.sh"] == spec(env).eval_script
    assert box.put_files[f"{GRADE_DIR}/test.patch"] == env.grader_input["test_patch"]
    assert "git apply --check /tmp/harnessrl-swebench/test.patch" in box.ran[1]
    assert "git checkout a5ec5417937d05a17f160f6d1875553566f6e81a -- tests/test_stats.py" in box.ran[1]
    assert box.ran[2] == f"/bin/bash {GRADE_DIR}/eval.sh > {GRADE_DIR}/test_output.txt 2>&1"


def test_an_unchanged_repository_scores_zero_without_a_test_run():
    box = ScriptedBox([ExecResult(0, "")])
    result = grade(box)
    assert result.value == 0.0 and len(box.ran) == 1


def test_ways_out():
    not_a_repo = grade(ScriptedBox([ExecResult(128, "fatal: not a git repository")]))
    assert not_a_repo.value is None and "cannot compare" in (not_a_repo.error or "")
    broken = grade(ScriptedBox([CHANGED, ExecResult(1, "error: patch failed: tests/test_stats.py:9")]))
    assert broken.value is None and "does not apply" in (broken.error or "")
    assert "patch failed" in broken.output
    hung = grade(ScriptedBox([CHANGED, APPLIES, ExecResult(None, "", timed_out=True)], log=b"+ python3 -m unit"))
    assert (hung.value, hung.error) == (0.0, None) and "timed out after 60 s" in hung.output
    no_log = grade(ScriptedBox([CHANGED, APPLIES, ExecResult(127, "bash: not found")], log=None))
    assert no_log.value is None and "wrote no log" in (no_log.error or "")
    bad_input = TaskEnvironment(name="x", image="i", grader="swebench", grader_input={"instance_id": "x"})
    assert "malformed grader input" in (grade(ScriptedBox([]), bad_input).error or "")
