"""A verifier command with Kubernetes attempts is refused when the run starts, before the cluster is asked
anything; the same config without it is accepted and its attempts are scored from the pod's own post.

Before, such a config was accepted and every attempt then ended as ``infra`` when scored (the verifier
runs where the workspace is, and a Kubernetes attempt's workspace stays in its pod).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from k8s_cluster import NS, TEMPLATE, Cluster
from k8s_cluster import spec as attempt_spec
from run_config import write_run_config

from harnessrl.cli import main
from harnessrl.config import ConfigError, load_config
from harnessrl.rewards import score_attempt
from harnessrl.runners import make_runner
from harnessrl.runners.k8s_manifest import job_name
from harnessrl.store import open_store
from harnessrl.tasks import TaskLoadError, load_tasks
from harnessrl.types import RolloutStatus

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


def _config_file(tmp_path: Path, url: str, rewards: dict[str, Any]) -> Path:
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "t1", "input": {"q": "2+2?"}}) + "\n")
    return write_run_config(tmp_path / "run.toml", {
        "run": {"dir": "out"},
        "tasks": {"train": "tasks.jsonl"},
        "runner": {"kind": "kubernetes", "command": ["python", "/app/agent.py"],
                   "kubernetes": {"api_server": url, "namespace": NS, "api_retry_backoff_s": 0.01,
                                  "job_template": TEMPLATE}},
        "rewards": rewards,
    })


async def test_a_verifier_with_kubernetes_is_refused_at_start(cluster: Cluster, tmp_path: Path) -> None:
    path = _config_file(tmp_path, cluster.url, {"verifier": ["python", "verify.py"]})
    with pytest.raises(ConfigError, match=r"\[rewards\] verifier cannot be used with Kubernetes") as info:
        load_config(path)
    assert "'image' and 'tests'" in str(info.value) and "exit_code_map" in str(info.value)  # the fixes
    with pytest.raises(SystemExit, match="verifier cannot be used with Kubernetes"):
        await asyncio.to_thread(main, ["train", str(path)])
    assert cluster.km._requests == []  # refused before any Job was made
    assert not (tmp_path / "out").exists()


async def test_a_task_verifier_with_kubernetes_is_refused_when_tasks_load(cluster: Cluster, tmp_path: Path) -> None:
    path = _config_file(tmp_path, cluster.url, {})
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "t1", "input": {}, "verifier": ["python", "v.py"]}))
    with pytest.raises(TaskLoadError, match="task 't1' names a 'verifier'.*an 'image' and 'tests'.*in the pod"):
        load_tasks(load_config(path), "run-1")


async def test_without_a_verifier_the_pods_post_scores_the_attempt(cluster: Cluster, tmp_path: Path) -> None:
    config = load_config(_config_file(tmp_path, cluster.url, {"exit_code_map": {0: 0.5}}))
    store = open_store("sqlite:///:memory:")
    runner = make_runner(config.runner, run_id="run-1")
    try:
        rid = store.create_rollout(task_id="t1", input={}, group_id="g", api_key_hash="h").id
        spec = attempt_spec(config.runner, rid)
        task = asyncio.create_task(runner.run(spec))
        await cluster.wait_job(job_name(rid))
        store.add_reward(rid, 1.0, "reward")  # what the harness in the pod posts to HARNESSRL_REWARD_URL
        await cluster.add_pod(job_name(rid), exit_code=0, log=b"done\n")
        await cluster.finish(job_name(rid), succeeded=1)
        result = await task
        outcome = await score_attempt(spec, result, store, config.rewards)
        assert result.status is RolloutStatus.SUCCEEDED and outcome.failure_kind is None
        assert outcome.components == {"harness": 1.0, "exit_code": 0.5} and outcome.value == 1.0
    finally:
        await runner.aclose()
        store.close()
