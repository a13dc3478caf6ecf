"""mini-swe-agent (PyPI, unmodified, its own CLI) on a swe task, end to end: ``harnessrl collect`` then one
``harnessrl train`` step on a group of two attempts, through the real controller, local runner, gateway
(render mode "gateway"), embedded engine, verifier and trainer; the update must move the weights.

The policy is the tiny random model (``model = "tiny"``), not SmolLM2: on this CPU a SmolLM2 call with
mini's ~1,100-token prompt takes tens of seconds to minutes, the tiny one well under a second, and the
plumbing under test is the same. The tiny model never produces a valid tool call, so mini answers each
call with its format-error message (dropping the failed reply from its history) and gives up after three
in a row (``RepeatedFormatError``) or at its step limit: every rollout has ``STEP_LIMIT`` = 3 calls.
Both attempts of the training group would score 0, and a group with equal rewards is dropped (no
gradient), so the training run scores with ``ranked_verify.py``: the real verifier plus 1.0 for the first
attempt verified.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from run_config import TINY_ENGINE, TINY_LORA, write_run_config
from safetensors.torch import load_file

from harnessrl.config import load_config
from harnessrl.drivers.rl import run_collect, run_train
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import open_store
from harnessrl.types import FailureKind, TaskSplit

if importlib.util.find_spec("minisweagent") is None or shutil.which(
        "mini", path=str(Path(sys.executable).parent)) is None:
    pytest.skip("mini-swe-agent is not installed: pip install -e '.[harnesses]'", allow_module_level=True)

from ._tasks import SWE, swe_task  # noqa: E402

sys.path.insert(0, str(SWE))
from fidelity import report  # noqa: E402

STEP_LIMIT = 3


def swe_config(tmp_path: Path, task: str = "slugify", attempts: int = 1,
               verifier: Path = SWE / "verify.py") -> dict[str, Any]:
    """The run config (a ``run_config`` layer) of one SWE task, written to ``tmp_path / "tasks.jsonl"``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    record = swe_task(f"swe-{task}")
    (tmp_path / "tasks.jsonl").write_text(json.dumps(record) + "\n")
    runner: dict[str, Any] = {"command": ["bash", str(SWE / "run_agent.sh")], "concurrency": 2, "timeout_s": 240,
                              "keep_workdirs": "all", "env": {"SWE_STEP_LIMIT": str(STEP_LIMIT)}}
    if verifier.name == "ranked_verify.py":  # it ranks verifiers by a marker file they share; sandboxed ones share nothing
        runner["sandbox"] = "none"
    return {
        "run": {"name": "swe-e2e", "dir": str(tmp_path / "run"), "steps": 1, "tasks_per_step": 1,
                "attempts_per_task": attempts, "eval_at_start": False},
        "tasks": {"train": "tasks.jsonl", "eval": "tasks.jsonl"},
        # mini's prompt is ~1,100 SmolLM2 tokens, more for the tiny byte-level vocabulary
        "engine": {**TINY_ENGINE, "context_window": 8192},
        "gateway": {"limits": {"max_tokens_per_call": 24}},
        "runner": runner,
        "rewards": {"verifier": [sys.executable, str(verifier)], "verifier_env": {"RANKED_VERIFY_DIR": str(tmp_path)}},
        "training": {"lr": 1e-3, "lora": TINY_LORA},
    }


def mini_model_calls(workdir: Path) -> int:
    """Model calls as mini counted them in its own trajectory file (its history drops failed replies)."""
    traj = json.loads((workdir / "traj.json").read_text())
    return int(traj["info"]["model_stats"]["api_calls"])


@pytest.mark.slow
def test_mini_swe_agent_collect_and_train(tmp_path: Path) -> None:
    # tasks.jsonl is both splits here only to run one file; ids must differ, so train uses a copy
    cfg = write_run_config(tmp_path, swe_config(tmp_path), {"tasks": {"train": "train.jsonl"}})
    rec = json.loads((tmp_path / "tasks.jsonl").read_text())
    (tmp_path / "train.jsonl").write_text(json.dumps({**rec, "id": rec["id"] + "-train"}) + "\n")
    config = load_config(cfg)

    result = run_collect(config, None, TaskSplit.EVAL)
    assert result.tasks == 1
    store = open_store(config.store_url)
    runs = sorted(store.list_runs(), key=lambda r: r.created_at)
    (rollout,) = store.list_rollouts(run_id=runs[-1].id)
    assert rollout.failure_kind != FailureKind.INFRA, rollout.error
    calls = store.get_calls(rollout.id)
    workdir = config.run_dir / "attempts" / rollout.id / "workspace"
    # every model call mini made is in the store, with token ids and logprobs
    assert len(calls) == mini_model_calls(workdir) == STEP_LIMIT
    for c in calls:
        assert c.prompt_token_ids and c.completion_token_ids
        assert len(c.choices[0].logprobs) == len(c.completion_token_ids)
        assert [t["function"]["name"] for t in c.request["tools"]] == ["bash"]  # mini's own tool
    rewards = {r.name: r.value for r in store.get_rewards(rollout.id)}
    assert rewards["verifier"] == 0.0 and rewards["final"] == 0.0 and "tamper" not in rewards
    assert (workdir / "tests" / "test_hidden_slugify.py").is_file()  # copied in after the agent exited
    rep = report(store, runs[-1].id)
    print("\ncollect:", *rep.lines(), sep="\n  ")
    assert rep.calls_with_tokens == rep.calls == STEP_LIMIT

    # training: its own run, a group of two attempts of the train task (ranked_verify: rewards 1 and 0)
    cfg = write_run_config(tmp_path / "train", swe_config(tmp_path / "train", attempts=2,
                                                          verifier=Path(__file__).with_name("ranked_verify.py")),
                           {"tasks": {"train": "train.jsonl"}})
    rec = json.loads((tmp_path / "train" / "tasks.jsonl").read_text())
    (tmp_path / "train" / "train.jsonl").write_text(json.dumps({**rec, "id": rec["id"] + "-train"}) + "\n")
    config = load_config(cfg)
    store.close()
    summary = run_train(config)
    store = open_store(config.store_url)
    rep = report(store, summary.run_id)
    print("train:", *rep.lines(), sep="\n  ")
    assert [v.version for v in store.list_policy_versions(summary.run_id)] == [1]
    checkpoint = config.run_dir / "checkpoints" / "step_000001"
    assert checkpoint.is_dir()
    train = [r for r in store.list_rollouts(run_id=summary.run_id) if r.metadata.get("split") == "train"]
    assert len(train) == 2 and {r.group_id for r in train} == {train[0].group_id}
    assert all(len(store.get_calls(r.id)) == STEP_LIMIT for r in train)
    assert sorted(rollout_reward(store.get_rewards(r.id)) for r in train) == [0.0, 1.0]
    (metrics,) = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()
                  if "grad_norm" in line]
    assert metrics["samples/rollouts"] == 2 and metrics["grad_norm"] > 0, metrics
    # LoRA's B matrices start at zero and only a gradient moves them (weight decay keeps zero at zero)
    weights = load_file(str(checkpoint / "trainable.safetensors"))
    lora_b = [t for name, t in weights.items() if "lora_B" in name]
    assert lora_b and any(t.abs().max().item() > 0 for t in lora_b)
    store.close()
