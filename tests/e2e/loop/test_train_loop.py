"""The whole loop on the tiny model: controller, local runner, gateway, engine, trainer, store.

Real parts throughout: the harness is a subprocess using the official openai client against the real
gateway, which forwards to the embedded engine; rewards come from a verifier command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.config import load_config
from harnessrl.controller import StepFailed
from harnessrl.drivers.rl import run_collect, run_train
from harnessrl.runners.preflight import CommandNotFound
from harnessrl.store import open_store
from harnessrl.types import FailureKind, RolloutStatus, TaskSplit

from ._config import HERE, loop_config


def test_train_loop_records_everything_and_advances_the_policy(tmp_path: Path) -> None:
    config = load_config(write_run_config(tmp_path, loop_config(tmp_path, attempts=3)))
    summary = run_train(config)
    store = open_store(config.store_url)
    train = [r for r in store.list_rollouts(run_id=summary.run_id, limit=1000)
             if r.metadata.get("split") == "train"]
    assert len(train) == 2 * 2 * 3  # steps x tasks x attempts
    assert all(r.status == RolloutStatus.SUCCEEDED for r in train)
    for r in train:
        calls = store.get_calls(r.id)
        assert len(calls) == 2
        assert all(c.prompt_token_ids and c.completion_token_ids for c in calls)
        # token-exact rendering: the second prompt starts with the first call's prompt + completion
        first = calls[0].prompt_token_ids + calls[0].completion_token_ids
        assert calls[1].prompt_token_ids[: len(first)] == first
        assert [x.name for x in store.get_rewards(r.id)].count("final") == 1
    # step 1 ran on version 0; step 2's calls were served by the version published after step 1
    assert {c.policy_version for r in train if r.step == 1 for c in store.get_calls(r.id)} == {0}
    assert {c.policy_version for r in train if r.step == 2 for c in store.get_calls(r.id)} == {1}
    # step 1 samples the untrained policy as the first evaluation does: it is launched beside it, not after
    first_eval = [r for r in store.list_rollouts(run_id=summary.run_id, limit=1000)
                  if r.metadata.get("split") == "eval" and ":eval:v0:" in (r.group_id or "")]
    assert len(first_eval) == 3
    assert min(r.created_at for r in train if r.step == 1) < max(r.finished_at or 0 for r in first_eval)
    versions = [v.version for v in store.list_policy_versions(summary.run_id)]
    assert versions == [1, 2]
    assert (config.run_dir / "checkpoints" / "step_000002").is_dir()
    rows = [json.loads(x) for x in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    metrics = [m for m in rows if "loss" in m]
    assert len(metrics) == 2 and sum(m["tokens/trained"] for m in metrics) > 0
    steps = [json.loads(x) for x in (config.run_dir / "events.jsonl").read_text().splitlines()]
    steps = [e for e in steps if e["event"] == "step"]
    # the trainer scores rollouts by the same `final` reward the controller reports (not final + its sources)
    assert [m["reward/mean"] for m in metrics] == pytest.approx([e["reward_mean"] for e in steps])
    evals = [m for m in rows if "eval/reward_mean" in m]
    assert [m["step"] for m in evals] == [0, 2]  # held-out curve by policy version
    assert (config.run_dir / "tb").is_dir()
    assert summary.baseline is not None and summary.final is not None
    assert summary.final.tasks == 3 and summary.final.policy_version == 2
    assert summary.held_out_line().startswith("held-out reward: ")
    assert store.get_run(summary.run_id).ended_at is not None  # retention may purge it from now on
    # collect reruns the held-out tasks with the trained checkpoint, no training
    result = run_collect(config, config.run_dir / "checkpoints" / "step_000002")
    assert result.tasks == 3 and result.policy_version == 2
    store.close()


def test_faulty_harnesses_are_contained(tmp_path: Path) -> None:
    """Crash, hang (timeout), tamper and silent harnesses: the run goes on, each is recorded for what it is."""
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=1, train="faults.jsonl", attempts=1),
                           {"run": {"tasks_per_step": 5}, "runner": {"timeout_s": 25}})
    config = load_config(cfg)
    summary = run_train(config)
    store = open_store(config.store_url)
    by_task = {r.task_id: r for r in store.list_rollouts(run_id=summary.run_id, step=1, limit=100)}
    assert by_task["b-normal"].status == RolloutStatus.SUCCEEDED
    assert by_task["b-crash"].status == RolloutStatus.FAILED
    assert by_task["b-crash"].failure_kind == FailureKind.AGENT and by_task["b-crash"].exit_code == 3
    assert by_task["b-hang"].status == RolloutStatus.TIMED_OUT
    tamper = by_task["b-tamper"]
    assert tamper.status == RolloutStatus.FAILED and tamper.failure_kind == FailureKind.AGENT
    rewards = {x.name: x.value for x in store.get_rewards(tamper.id)}
    assert rewards["final"] == 0.0 and "tamper" in rewards
    assert store.get_calls(by_task["b-silent"].id) == []
    assert (config.run_dir / "checkpoints" / "step_000001").is_dir()
    store.close()


def test_resume_after_sigkill_reuses_finished_rollouts(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=2))
    config = load_config(cfg)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "train", str(cfg)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    db = config.run_dir / "store.db"
    deadline = time.monotonic() + 240
    # kill once step 1 is trained and step 2 has attempts in flight
    while time.monotonic() < deadline:
        if db.exists() and (config.run_dir / "checkpoints" / "step_000001").is_dir():
            s = open_store(config.store_url)
            step2 = s.list_rollouts(step=2, limit=100)
            s.close()
            if any(not r.status.terminal for r in step2):
                break
        assert proc.poll() is None, "train exited before it could be killed"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    store = open_store(config.store_url)
    before = {r.id: r for r in store.list_rollouts(step=2, limit=100)}
    finished_before = {rid for rid, r in before.items() if r.status.terminal}
    store.close()

    summary = run_train(config)  # same run directory: resumes
    store = open_store(config.store_url)
    after = {r.id: r for r in store.list_rollouts(run_id=summary.run_id, step=2, limit=100)}
    assert finished_before <= set(after), "finished rollouts were kept"
    for rid in finished_before:
        assert after[rid].status == before[rid].status  # not re-run
    interrupted = {rid for rid, r in before.items() if not r.status.terminal}
    assert interrupted, "the kill should have caught attempts in flight"
    for rid in interrupted:
        assert after[rid].status == RolloutStatus.FAILED and after[rid].failure_kind == FailureKind.INFRA
    good = [r for r in after.values() if r.failure_kind != FailureKind.INFRA]
    assert len(good) == 2 * 2  # every group whole again
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1, 2]
    metrics = [json.loads(x) for x in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m][-1] >= 1
    assert not any(TaskSplit.TRAIN.value == r.metadata.get("split") and r.step == 3 for r in after.values())
    store.close()


def test_async_mode_overlaps_steps_within_the_staleness_bound(tmp_path: Path) -> None:
    """async: step 2's rollouts run while step 1 trains; none is trained more than 1 version stale."""
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=3, attempts=2),
                           {"run": {"mode": "async", "max_staleness": 1}})
    config = load_config(cfg)
    summary = run_train(config)
    store = open_store(config.store_url)
    train = [r for r in store.list_rollouts(run_id=summary.run_id, limit=1000) if r.metadata.get("split") == "train"]
    # step 2 was launched (beside the first evaluation and step 1) before step 1's update was published: its
    # first attempts ran on version 0; those the runner's slots queued until after it, on version 1
    step2 = {c.policy_version for r in train if r.step == 2 for c in store.get_calls(r.id)}
    assert 0 in step2 and step2 <= {0, 1}
    events = [json.loads(x) for x in (config.run_dir / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3] and all(e["stale_dropped"] == 0 for e in steps)
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1, 2, 3]
    store.close()


def test_keep_checkpoints_deletes_old_steps_after_each_new_one_and_resume_still_works(tmp_path: Path) -> None:
    """``[run] keep_checkpoints = 1``: after each step only the newest checkpoint is left (a full fine-tune
    would otherwise write weights and optimizer state every step); a second run resumes from it."""
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=2, attempts=1), {"run": {"keep_checkpoints": 1}})
    config = load_config(cfg)
    summary = run_train(config)
    assert sorted(p.name for p in (config.run_dir / "checkpoints").iterdir()) == ["step_000002"]
    store = open_store(config.store_url)
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1, 2]  # the history stays
    store.close()
    more = load_config(write_run_config(tmp_path, loop_config(tmp_path, steps=3, attempts=1),
                                        {"run": {"keep_checkpoints": 1}}))
    run_train(more)  # resumes from step 2's checkpoint, trains step 3
    assert sorted(p.name for p in (more.run_dir / "checkpoints").iterdir()) == ["step_000003"]
    events = [json.loads(x) for x in (more.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3]  # resumed, not started over


def test_tasks_from_a_datasets_dataset(tmp_path: Path) -> None:
    """[tasks] dataset: a `datasets` dataset (here a local folder of JSONL splits) instead of task files."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text((HERE / "train.jsonl").read_text())
    (data / "test.jsonl").write_text((HERE / "eval.jsonl").read_text())
    layer = loop_config(tmp_path, steps=1)
    layer["tasks"] = {"dataset": str(data)}
    cfg = write_run_config(tmp_path, layer)
    config = load_config(cfg)
    from harnessrl.tasks import load_tasks

    tasks = load_tasks(config, "r")
    assert len(tasks[TaskSplit.TRAIN]) == 6 and len(tasks[TaskSplit.EVAL]) == 3
    assert tasks[TaskSplit.TRAIN][0].task.input["question"] == "question number 0"


def test_a_missing_harness_command_fails_before_the_model_loads(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, loop_config(tmp_path),
                           {"runner": {"command": ["no-such-harness-xyz", str(HERE / "agent.py")]}})
    config = load_config(cfg)
    t0 = time.perf_counter()
    with pytest.raises(CommandNotFound, match="no-such-harness-xyz"):
        run_train(config)
    assert time.perf_counter() - t0 < 10
    assert not (config.run_dir / "checkpoints").exists()


def test_a_step_with_only_infra_failures_stops_the_run_untrained_and_resumes(tmp_path: Path) -> None:
    """A broken verifier makes every attempt an infra failure: stop with its message, train nothing;
    once it is fixed the same command resumes at that step."""
    broken = tmp_path / "broken_verify.py"
    broken.write_text("import sys\nprint('verifier cannot import its checker', file=sys.stderr)\nsys.exit(7)\n")
    good = loop_config(tmp_path, steps=1)
    cfg = write_run_config(tmp_path, good, {"rewards": {"verifier": [sys.executable, str(broken)]}})
    config = load_config(cfg)
    with pytest.raises(StepFailed, match="verifier cannot import its checker") as info:
        run_train(config)
    assert "step 1" in str(info.value) and "resumes at step 1" in str(info.value)
    assert not (config.run_dir / "checkpoints").exists()  # nothing trained
    events = [json.loads(x) for x in (config.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "step_failed"] == [1]
    write_run_config(cfg, good)
    summary = run_train(load_config(cfg))
    assert (config.run_dir / "checkpoints" / "step_000001").is_dir()
    store = open_store(config.store_url)
    step1 = store.list_rollouts(run_id=summary.run_id, step=1, limit=1000)
    assert any(r.failure_kind == FailureKind.INFRA for r in step1)  # the failed attempts stay recorded
    assert sum(r.status == RolloutStatus.SUCCEEDED for r in step1) == 2 * 2
    store.close()


def test_ctrl_c_stops_harnesses_and_says_how_to_resume(tmp_path: Path) -> None:
    """SIGINT while a harness hangs: exit 130 with a resume hint, and no harness process left behind."""
    cfg = write_run_config(tmp_path, loop_config(tmp_path, steps=1, train="faults.jsonl", attempts=1))
    config = load_config(cfg)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "train", str(cfg)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    hang = None
    while time.monotonic() < deadline and hang is None:  # wait until the hanging harness runs
        assert proc.poll() is None, proc.communicate()
        if (config.run_dir / "store.db").exists():
            s = open_store(config.store_url)
            hang = next((r for r in s.list_rollouts(limit=100)
                         if r.task_id == "b-hang" and r.status == RolloutStatus.RUNNING), None)
            s.close()
        time.sleep(0.2)
    assert hang is not None and hang.runner_handle and hang.runner_handle.startswith("local:")
    pid = int(hang.runner_handle.split(":")[1])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Run the same command to resume" in err and "Traceback" not in err
    time.sleep(0.5)
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the hanging harness outlived the controller"
    store = open_store(config.store_url)
    after = store.get_rollout(hang.id)
    store.close()
    assert after.status == RolloutStatus.FAILED and after.failure_kind == FailureKind.INFRA
    assert "interrupted" in (after.error or "")
