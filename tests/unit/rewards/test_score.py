"""Scoring real attempts: verifier, hidden files, tampering, exit codes, harness posts, combination."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessrl.rewards import RewardConfig, RewardOutcome, score_attempt
from harnessrl.rewards.posted import trained_rewards
from harnessrl.runners import AttemptResult, AttemptSpec, RunnerConfig, TaskAssets, make_attempt_spec
from harnessrl.runners.local import LocalRunner
from harnessrl.store import Store, open_store
from harnessrl.types import FailureKind, Reward, RolloutStatus

PY = sys.executable


@pytest.fixture
def store() -> Iterator[Store]:
    s = open_store("sqlite:///:memory:")
    yield s
    s.close()


def script(tmp_path: Path, name: str, code: str) -> list[str]:
    path = tmp_path / "scripts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return [PY, str(path)]


def attempt(
    tmp_path: Path,
    store: Store,
    harness: str,
    *,
    assets: TaskAssets | None = None,
    protected: tuple[str, ...] = (),
    task_input: dict | None = None,
    posts: list[tuple[str, float]] = (),
    **runner_kw: object,
) -> tuple[AttemptSpec, AttemptResult]:
    """Run ``harness`` as a real attempt of a real rollout; ``posts`` stand in for its reward-URL posts."""
    task_input = task_input or {"question": "what is 6*7?"}
    rollout = store.create_rollout(task_id="t1", input=task_input, group_id="g1", api_key_hash="h")
    config = RunnerConfig(command=script(tmp_path, "harness.py", harness), **runner_kw)  # type: ignore[arg-type]
    spec = make_attempt_spec(
        config,
        rollout_id=rollout.id,
        task_id="t1",
        task_input=task_input,
        gateway_url="http://127.0.0.1:1",
        api_key="secret-key",
        assets=assets,
        protected=protected,
    )

    def started(handle: str) -> None:
        store.transition_rollout(rollout.id, RolloutStatus.RUNNING, runner_handle=handle)

    result = asyncio.run(LocalRunner(config, tmp_path / "attempts").run(spec, on_start=started))
    for name, value in posts:
        store.add_reward(rollout.id, value, name)
    return spec, result


def score(spec: AttemptSpec, result: AttemptResult, store: Store, **cfg: object) -> RewardOutcome:
    return asyncio.run(score_attempt(spec, result, store, RewardConfig(**cfg)))  # type: ignore[arg-type]


def rewards(store: Store, rollout_id: str) -> dict[str, float]:
    return {r.name: r.value for r in store.get_rewards(rollout_id)}


ANSWER_HARNESS = """
import os, pathlib
pathlib.Path("answer.txt").write_text(os.environ.get("ANSWER", "42"))
"""

CHECKER = """
import json, os, pathlib
assert "OPENAI_API_KEY" not in os.environ and "ANTHROPIC_API_KEY" not in os.environ  # no keys for verifiers
ref = json.loads(os.environ["HARNESSRL_VERIFIER_INPUT"])["answer"]
assert json.load(open(os.environ["HARNESSRL_VERIFIER_INPUT_FILE"]))["answer"] == ref
assert json.loads(os.environ["HARNESSRL_TASK_INPUT"])["question"] == "what is 6*7?"
pathlib.Path("verifier_ran").write_text("yes")
print("checking...")
print(1.0 if pathlib.Path("answer.txt").read_text().strip() == ref else 0.0)
"""


@pytest.mark.parametrize(("answer", "expected"), [("42", 1.0), ("41", 0.0)])
def test_verifier_reward_is_parsed_and_recorded(
    tmp_path: Path, store: Store, answer: str, expected: float
) -> None:
    assets = TaskAssets(verifier_input={"answer": "42"})
    spec, result = attempt(tmp_path, store, ANSWER_HARNESS, assets=assets, env={"ANSWER": answer})
    outcome = score(spec, result, store, verifier=script(tmp_path, "check.py", CHECKER))
    assert outcome.value == expected and outcome.components == {"verifier": expected}
    assert outcome.status is RolloutStatus.SUCCEEDED and outcome.failure_kind is None
    assert rewards(store, spec.rollout_id) == {"verifier": expected, "final": expected}
    assert "checking..." in outcome.verifier_output


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        ("raise RuntimeError('verifier bug')", "verifier bug"),
        ("print('all good!')", "not a number"),
        ("print(float('nan'))", "finite"),
        ("import time; time.sleep(30)", "timeout"),
    ],
)
def test_verifier_failure_is_infra_not_a_punishment(
    tmp_path: Path, store: Store, verifier: str, message: str
) -> None:
    spec, result = attempt(tmp_path, store, ANSWER_HARNESS, posts=[("reward", 1.0)])
    cmd = script(tmp_path, "bad_verifier.py", verifier)
    # Only the sleeping verifier may reach its timeout: a loaded machine can take over 0.5 s to start Python.
    timeout_s = 0.5 if message == "timeout" else 60.0
    outcome = score(spec, result, store, verifier=cmd, verifier_timeout_s=timeout_s, verifier_kill_grace_s=0.1)
    assert outcome.value is None
    assert outcome.status is RolloutStatus.FAILED and outcome.failure_kind is FailureKind.INFRA
    assert "verifier failed" in outcome.reason and message in outcome.reason
    assert "final" not in rewards(store, spec.rollout_id)


def test_verifier_failure_reward_when_configured(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, ANSWER_HARNESS)
    cmd = script(tmp_path, "bad_verifier.py", "raise SystemExit(2)")
    outcome = score(spec, result, store, verifier=cmd, verifier_failure_reward=0.0)
    assert outcome.value == 0.0 and outcome.failure_kind is None
    assert "exited with code 2" in outcome.reason
    assert rewards(store, spec.rollout_id) == {"verifier": 0.0, "final": 0.0}


def test_hidden_files_appear_only_after_the_harness_exits(tmp_path: Path, store: Store) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "tests").mkdir(parents=True)
    (hidden / "tests" / "test_hidden.py").write_text("EXPECTED = '42'\n")
    harness = f"""
    import os, pathlib
    leaked = [k for k, v in os.environ.items() if {str(hidden)!r} in v or "HIDDEN" in k]
    present = pathlib.Path("tests/test_hidden.py").exists()
    print("hidden visible:", present or bool(leaked))
    pathlib.Path("answer.txt").write_text("42")
    """
    verifier = """
    import os, pathlib
    ns = {}
    exec(pathlib.Path(os.environ["HARNESSRL_HIDDEN_DIR"], "tests", "test_hidden.py").read_text(), ns)
    print(1.0 if pathlib.Path("answer.txt").read_text() == ns["EXPECTED"] else 0.0)
    """
    spec, result = attempt(tmp_path, store, harness, assets=TaskAssets(hidden_dir=hidden))
    assert result.stdout.strip() == "hidden visible: False"
    assert not (result.workdir / "tests").exists()
    outcome = score(spec, result, store, verifier=script(tmp_path, "v.py", verifier))
    assert outcome.value == 1.0
    assert (result.workdir / "tests" / "test_hidden.py").exists()


@pytest.mark.parametrize(
    ("action", "change"),
    [
        ("pathlib.Path('tests/test_a.py').write_text('def test(): pass')", "modified: tests/test_a.py"),
        ("pathlib.Path('tests/test_a.py').unlink()", "deleted: tests/test_a.py"),
        ("pathlib.Path('tests/conftest.py').write_text('')", "added: tests/conftest.py"),
        ("pathlib.Path('grader.py').write_text('print(1)')", "modified: grader.py"),
    ],
)
def test_tampering_gives_zero_with_reason_and_skips_the_verifier(
    tmp_path: Path, store: Store, action: str, change: str
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_a.py").write_text("def test(): assert solve() == 42\n")
    (workspace / "grader.py").write_text("print(0)\n")
    (workspace / "solution.py").write_text("def solve(): ...\n")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "secret_test.py").write_text("")
    harness = f"""
    import pathlib
    pathlib.Path("solution.py").write_text("def solve(): return 42")  # allowed: not protected
    {action}
    """
    assets = TaskAssets(workspace=workspace, hidden_dir=hidden, protected=("tests/*.py",))
    spec, result = attempt(
        tmp_path, store, harness, assets=assets, protected=("grader.py",), posts=[("reward", 1.0)]
    )
    assert result.status is RolloutStatus.SUCCEEDED
    outcome = score(spec, result, store, verifier=script(tmp_path, "check.py", CHECKER))
    assert outcome.value == 0.0 and outcome.tampered == (change,)
    assert outcome.status is RolloutStatus.FAILED and outcome.failure_kind is FailureKind.AGENT
    assert change in outcome.reason
    assert rewards(store, spec.rollout_id) == {"reward": 1.0, "tamper": 0.0, "final": 0.0}
    assert not (result.workdir / "verifier_ran").exists()
    assert not (result.workdir / "secret_test.py").exists()  # hidden files never reach a tampered workspace


def test_untouched_protected_files_let_the_verifier_run(tmp_path: Path, store: Store) -> None:
    workspace = tmp_path / "ws"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_a.py").write_text("x = 1\n")
    assets = TaskAssets(workspace=workspace, protected=("tests/**/*.py",), verifier_input={"answer": "42"})
    spec, result = attempt(tmp_path, store, ANSWER_HARNESS, assets=assets)
    assert result.protected_sha256.keys() == {"tests/test_a.py"}
    outcome = score(spec, result, store, verifier=script(tmp_path, "check.py", CHECKER))
    assert outcome.value == 1.0 and not outcome.tampered


@pytest.mark.parametrize(("code", "expected"), [(0, 1.0), (2, 0.0)])
def test_exit_code_reward(tmp_path: Path, store: Store, code: int, expected: float) -> None:
    spec, result = attempt(tmp_path, store, f"raise SystemExit({code})")
    outcome = score(spec, result, store, exit_code_map={"0": 1.0})  # TOML keys are strings
    assert outcome.value == expected and outcome.components == {"exit_code": expected}
    assert rewards(store, spec.rollout_id) == {"exit_code": expected, "final": expected}
    assert (outcome.failure_kind is FailureKind.AGENT) == (code != 0)


def test_exit_code_source_is_off_by_default(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, "pass")
    outcome = score(spec, result, store)
    assert outcome.components == {} and outcome.value == 0.0  # missing_reward
    assert "posted none" in outcome.reason
    outcome = score(spec, result, store, missing_reward=None)
    assert outcome.value is None and outcome.failure_kind is FailureKind.INFRA


def test_harness_posts_last_value_per_name_summed(tmp_path: Path, store: Store) -> None:
    posts = [("reward", 0.3), ("reward", 0.6), ("style", 0.1), ("final", 99.0), ("verifier", 99.0)]
    spec, result = attempt(tmp_path, store, "pass", posts=posts)
    outcome = score(spec, result, store, exit_code_map={0: 1.0})
    assert outcome.value == pytest.approx(0.7) and outcome.components["harness"] == pytest.approx(0.7)
    only_reward = score(spec, result, store, harness_names=["reward"])
    assert only_reward.value == pytest.approx(0.6)
    assert store.get_rewards(spec.rollout_id)[-1].name == "final"


@pytest.mark.parametrize(
    ("mode", "expected"), [("sum", 1.5), ("min", 0.0), ("max", 1.0), ("mean", 0.5), ("harness", 0.5)]
)
def test_combination_modes(tmp_path: Path, store: Store, mode: str, expected: float) -> None:
    assets = TaskAssets(verifier_input={"answer": "42"})
    spec, result = attempt(tmp_path, store, "raise SystemExit(1)", assets=assets, posts=[("reward", 0.5)])
    verifier = script(tmp_path, "v.py", "print(1.0)")
    outcome = score(spec, result, store, combine=mode, verifier=verifier, exit_code_map={0: 1.0}, posted="train")
    assert outcome.components == {"harness": 0.5, "exit_code": 0.0, "verifier": 1.0}
    assert outcome.value == pytest.approx(expected)


@pytest.mark.parametrize(("mode", "expected"), [("sum", 1.0), ("max", 1.0), ("mean", 0.5), ("harness", 0.0)])
def test_beside_a_verifier_posts_are_recorded_not_trained(
    tmp_path: Path, store: Store, mode: str, expected: float
) -> None:
    spec, result = attempt(tmp_path, store, "raise SystemExit(1)", posts=[("reward", 1.0), ("reward", 1.0)])
    verifier = script(tmp_path, "v.py", "print(1.0)")
    outcome = score(spec, result, store, combine=mode, verifier=verifier, exit_code_map={0: 1.0})
    assert outcome.components["harness"] == 1.0  # shown, but not part of the final value
    assert outcome.value == pytest.approx(expected)
    names = [r.name for r in store.get_rewards(spec.rollout_id)]
    assert names.count("reward") == 2 and "posted" in names  # recorded, and marked as not trained
    per_call = Reward(spec.rollout_id, 1.0, "reward", call_index=0)  # what a per-call post looks like
    trained = trained_rewards([*store.get_rewards(spec.rollout_id), per_call])
    assert {r.name for r in trained} == {"final", "verifier", "exit_code", "posted"}
    assert all(r.call_index is None for r in trained)


def test_without_a_verifier_posts_are_trained_and_unmarked(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, "pass", posts=[("reward", 0.75)])
    outcome = score(spec, result, store)
    assert outcome.value == 0.75
    rewards = store.get_rewards(spec.rollout_id)
    assert "posted" not in {r.name for r in rewards} and trained_rewards(rewards) == rewards


def test_task_verifier_overrides_config_and_auto_prefers_it(tmp_path: Path, store: Store) -> None:
    assets = TaskAssets(verifier=tuple(script(tmp_path, "task_v.py", "print(0.25)")))
    spec, result = attempt(tmp_path, store, "pass", assets=assets, posts=[("reward", 1.0)])
    outcome = score(spec, result, store, verifier=script(tmp_path, "cfg_v.py", "print(0.75)"))
    assert outcome.value == 0.25 and outcome.components == {"harness": 1.0, "verifier": 0.25}


def test_infra_attempts_get_no_reward(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, "pass", assets=TaskAssets(workspace=tmp_path / "missing"))
    assert result.failure_kind is FailureKind.INFRA
    outcome = score(spec, result, store, exit_code_map={0: 1.0}, verifier=[PY, "-c", "print(1)"])
    assert outcome.value is None and outcome.failure_kind is FailureKind.INFRA
    assert store.get_rewards(spec.rollout_id) == []


def test_timed_out_reward(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, "import time; time.sleep(30)", timeout_s=0.5, kill_grace_s=0.1)
    assert result.status is RolloutStatus.TIMED_OUT
    outcome = score(spec, result, store, timed_out_reward=0.0, verifier=[PY, "-c", "print(1)"])
    assert outcome.value == 0.0 and outcome.status is RolloutStatus.TIMED_OUT
    assert outcome.failure_kind is FailureKind.AGENT
    scored = score(
        spec, result, store, verifier=[PY, "-c", "import os; print(os.environ['HARNESSRL_TIMED_OUT'])"]
    )
    assert scored.value == 1.0  # by default a timed-out attempt is scored like any other


def test_verifier_sees_the_harness_output_and_exit_code(tmp_path: Path, store: Store) -> None:
    spec, result = attempt(tmp_path, store, "print('the answer is 42'); raise SystemExit(4)")
    verifier = """
    import os
    out = open(os.environ["HARNESSRL_STDOUT_FILE"]).read()
    print(float("42" in out) + float(os.environ["HARNESSRL_EXIT_CODE"]))
    """
    outcome = score(spec, result, store, verifier=script(tmp_path, "v.py", verifier))
    assert outcome.value == 5.0 and outcome.failure_kind is FailureKind.AGENT


def test_reward_config_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError):
        RewardConfig(combine="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RewardConfig(verifer=["python", "x.py"])  # type: ignore[call-arg]
    assert json.loads(RewardConfig().model_dump_json())["combine"] == "auto"


def test_deleting_the_workspace_is_a_zero_not_an_escape(tmp_path: Path, store: Store) -> None:
    harness = "import os, shutil; d = os.getcwd(); os.chdir('/'); shutil.rmtree(os.path.dirname(d))"
    # Unsandboxed the harness can remove its attempt directory (in a sandbox it cannot even see it).
    spec, result = attempt(tmp_path, store, harness, sandbox="none")
    assert result.status is RolloutStatus.SUCCEEDED and not result.attempt_dir.exists()
    outcome = score(spec, result, store, verifier=[PY, "-c", "print(1)"])
    assert outcome.value == 0.0 and outcome.failure_kind is FailureKind.AGENT
    assert "removed its working directory" in outcome.reason


def _remote_result(spec: AttemptSpec, *, failure_kind: FailureKind | None = None,
                   status: RolloutStatus = RolloutStatus.SUCCEEDED) -> AttemptResult:
    """What a remote runner (a Kubernetes Job) reports: an outcome but no local workspace."""
    return AttemptResult(rollout_id=spec.rollout_id, status=status, failure_kind=failure_kind, reason=None,
                         exit_code=0, timed_out=False, stdout="", stderr="", stdout_bytes=0, stderr_bytes=0,
                         duration_s=1.0, attempt_dir=None, workdir=None, handle="k8s:ns/job")


def _remote_spec(store: Store) -> AttemptSpec:
    rollout = store.create_rollout(task_id="t1", input={}, group_id="g1", api_key_hash="h")
    return make_attempt_spec(RunnerConfig(command=["true"]), rollout_id=rollout.id, task_id="t1", task_input={},
                             gateway_url="http://127.0.0.1:1", api_key="k")


def test_remote_attempt_is_scored_from_harness_posts_and_exit_code(store: Store) -> None:
    spec = _remote_spec(store)
    store.add_reward(spec.rollout_id, 0.7, "answer")
    outcome = asyncio.run(score_attempt(spec, _remote_result(spec), store, RewardConfig()))
    assert outcome.value == 0.7 and outcome.status is RolloutStatus.SUCCEEDED and outcome.failure_kind is None
    exit_cfg = RewardConfig(harness=False, exit_code_map={0: 1.0})
    spec2 = _remote_spec(store)
    assert asyncio.run(score_attempt(spec2, _remote_result(spec2), store, exit_cfg)).value == 1.0


def test_remote_attempt_with_a_local_verifier_is_an_infra_failure_that_says_why(store: Store) -> None:
    spec = _remote_spec(store)
    outcome = asyncio.run(score_attempt(spec, _remote_result(spec), store, RewardConfig(verifier=["true"])))
    assert outcome.value is None and outcome.failure_kind is FailureKind.INFRA
    assert outcome.status is RolloutStatus.FAILED and "inside the pod" in (outcome.reason or "")


def test_infra_failure_reported_with_success_status_closes_as_failed(store: Store) -> None:
    spec = _remote_spec(store)
    result = _remote_result(spec, failure_kind=FailureKind.INFRA)
    outcome = asyncio.run(score_attempt(spec, result, store, RewardConfig()))
    assert outcome.status is RolloutStatus.FAILED and outcome.failure_kind is FailureKind.INFRA
