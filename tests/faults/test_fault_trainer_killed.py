"""Fault 4: the trainer is SIGKILLed mid-step (weights updated, not yet published or checkpointed) and
mid-checkpoint write; the same command resumes.

Real parts: ``harnessrl train`` as a process (tiny model, embedded engine, gateway, local runner, the
openai-client harness of tests/e2e/loop), killed with SIGKILL at the moment the run directory shows the
state we want, then run again. A step is trained once: one checkpoint per step, whose trainer state says
that step; one policy version per step in the store; step 2's calls are served by version 1 and nothing
else; the finished rollouts of step 1 are not run again.
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
from run_config import TINY_ENGINE, TINY_LORA, write_run_config

from harnessrl.config import load_config
from harnessrl.store import open_store

pytestmark = pytest.mark.slow
LOOP = Path(__file__).resolve().parents[1] / "e2e" / "loop"


def write_config(tmp_path: Path) -> Path:
    return write_run_config(tmp_path, {
        "run": {"name": "killed", "dir": str(tmp_path / "run"), "steps": 2, "tasks_per_step": 2,
                "attempts_per_task": 2, "eval_at_start": False},
        "tasks": {"train": str(LOOP / "train.jsonl")},
        "engine": TINY_ENGINE,
        "runner": {"command": [sys.executable, str(LOOP / "agent.py")], "concurrency": 8, "timeout_s": 60,
                   "sandbox": "none"},
        "rewards": {"verifier": [sys.executable, str(LOOP / "verify.py")], "protected": ["protected.txt"]},
        "training": {"lr": 1e-3, "lora": TINY_LORA},
    })


def train(cfg: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harnessrl.cli", "--log-level", "WARNING", "train", str(cfg)],
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)


def kill_when(proc: subprocess.Popen, ready, what: str, timeout_s: float = 300) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"train ended ({proc.returncode}) before {what}: {proc.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.001)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def steps_in_metrics(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(x)["step"] for x in path.read_text().splitlines() if x.strip() and "loss" in x]


def check_trained_once(cfg: Path) -> None:
    config = load_config(cfg)
    run_dir = config.run_dir
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert ckpts == ["step_000001", "step_000002"], ckpts
    for step in (1, 2):
        state = json.loads((run_dir / "checkpoints" / f"step_{step:06d}" / "trainer_state.json").read_text())
        assert (state["step"], state["policy_version"]) == (step, step), state
    store = open_store(config.store_url)
    try:
        (run,) = store.list_runs()
        versions = store.list_policy_versions(run.id)
        assert [v.version for v in versions] == [1, 2], versions
        for v in versions:
            assert v.checkpoint_path and v.checkpoint_path.endswith(f"step_{v.version:06d}"), v
        step2 = [r for r in store.list_rollouts(run_id=run.id, step=2, limit=100) if r.status.terminal]
        served = {c.policy_version for r in step2 for c in store.get_calls(r.id)}
        assert served == {1}, f"step 2's calls were served by versions {served}, not by version 1 only"
    finally:
        store.close()


def test_trainer_killed_mid_step_resumes_and_trains_the_step_once(tmp_path):
    cfg = write_config(tmp_path)
    run_dir = load_config(cfg).run_dir
    ckpt1 = run_dir / "checkpoints" / "step_000001"
    proc = train(cfg)
    # the optimizer step of step 1 is done (its metrics are written), the checkpoint is not: mid-step
    kill_when(proc, lambda: 1 in steps_in_metrics(run_dir) and not ckpt1.exists(), "step 1 trained")
    assert not ckpt1.exists()
    store = open_store(load_config(cfg).store_url)
    step1_before = {r.id for r in store.list_rollouts(step=1, limit=100) if r.status.terminal}
    store.close()

    resumed = train(cfg)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read().decode()[-3000:]
    check_trained_once(cfg)
    store = open_store(load_config(cfg).store_url)
    step1_after = {r.id for r in store.list_rollouts(step=1, limit=100)}
    store.close()
    assert step1_before <= step1_after and len(step1_after) == len(step1_before), \
        "step 1's finished rollouts were run again"


def test_trainer_killed_mid_checkpoint_write_resumes_and_trains_the_step_once(tmp_path):
    cfg = write_config(tmp_path)
    run_dir = load_config(cfg).run_dir
    tmp = run_dir / "checkpoints" / "step_000001.tmp"
    proc = train(cfg)
    kill_when(proc, lambda: tmp.exists(), "the step 1 checkpoint being written")
    assert not (run_dir / "checkpoints" / "step_000001").exists(), "the kill came after the rename"

    resumed = train(cfg)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read().decode()[-3000:]
    check_trained_once(cfg)
