"""A task with its own image on Kubernetes: the pod's layout (seed, harness as init container, verifier),
its run against a real HTTP Kubernetes API (kmock) with the verifier's log giving the grade, and the shell
scripts the pod runs, executed here by a real ``sh``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import kmock
import pytest
from k8s_cluster import JOBS, NS, PODS, Cluster, k8s_config, spec

from harnessrl.environments.task_env import ContainerTests, TaskEnvironment
from harnessrl.runners import make_runner
from harnessrl.runners.k8s_grade import grade, parse_report
from harnessrl.runners.k8s_manifest import NONCE_ANNOTATION, job_name
from harnessrl.runners.k8s_task_pod import HARNESS_SCRIPT, STATUS_DIR, TESTS_SOURCE, verifier_script
from harnessrl.runners.kubernetes import KubernetesRunner
from harnessrl.runners.spec import AttemptSpec, TaskAssets
from harnessrl.types import FailureKind, RolloutStatus

pytestmark = [pytest.mark.timeout(60)]
CONFIG_MAPS = f"/api/v1/namespaces/{NS}/configmaps"
IMAGE = "registry.example/task-7:1"


def make_tests(root: Path) -> Path:
    folder = root / "tests"
    (folder / "data").mkdir(parents=True)
    (folder / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (folder / "test.sh").chmod(0o755)
    (folder / "data" / "blob.bin").write_bytes(b"\xff\x00\xfe")
    return folder


def task_spec(runner: KubernetesRunner, root: Path, rid: str = "r1", **env: Any) -> AttemptSpec:
    fields: dict[str, Any] = {
        "name": "task-7",
        "image": IMAGE,
        "workdir": "/app",
        "cpus": 2,
        "memory_mb": 4096,
        "tests": ContainerTests(tests_dir=make_tests(root), timeout_s=30, env={"TESTS_VAR": "on"}),
        **env,
    }
    return spec(runner.config, rid, assets=TaskAssets(environment=TaskEnvironment(**fields)))


def runner_for(cluster: Cluster, **over: Any) -> KubernetesRunner:
    runner = make_runner(k8s_config(cluster.url, timeout_s=100, **over), run_id="run-1")
    assert isinstance(runner, KubernetesRunner)
    return runner


def report(nonce: str, *, harness: str = "exit=0 timed_out=0", tests: str | None = "exit=0 timed_out=0",
           reward: str | None = "0.75\n") -> bytes:
    """A verifier log as ``verifier_script`` prints it (the tests' output in between)."""
    m = f"harnessrl-{nonce}"
    lines = [f"{m} harness {harness}", "collected 3 items", f"{m} tests exit=1 timed_out=0"]  # forged by the tests
    if tests is not None:
        lines.append(f"{m} tests {tests}")
        if reward is not None:
            lines += [f"{m} file reward.txt", reward, f"{m} end"]
        lines.append(f"{m} done")
    return ("\n".join(lines) + "\n").encode()


async def add_task_pod(cluster: Cluster, job: str, *, verifier_log: bytes | None, harness_log: bytes = b"",
                       harness_state: dict[str, Any] | None = None, **status: Any) -> None:
    """The task pod as the kubelet leaves it, with a log per container."""
    pod = f"{job}-abcde"
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": NS, "creationTimestamp": "2026-11-29T12:00:00Z",
                     "labels": {"batch.kubernetes.io/job-name": job, "job-name": job}},
        "status": {
            "initContainerStatuses": [{"name": "harnessrl-seed", "state": done},
                                      {"name": "harness", "state": harness_state or done}],
            "containerStatuses": [{"name": "harnessrl-verifier", "state": done}],
            **status,
        },
    }
    await cluster.create(PODS, obj)
    cluster.km[f"get {PODS}/{pod}/log", kmock.params(container="harness")] << harness_log
    if verifier_log is not None:
        cluster.km[f"get {PODS}/{pod}/log", kmock.params(container="harnessrl-verifier")] << verifier_log


@pytest.mark.asyncio
async def test_pod_layout_grade_and_cleanup(cluster: Cluster, tmp_path: Path) -> None:
    runner = runner_for(cluster, harness_image="registry.example/harness:2", carry_paths=["/root/.venv"])
    s = task_spec(runner, tmp_path)
    name = job_name("r1")
    task = asyncio.create_task(runner.run(s))
    job = await cluster.wait_job(name)
    pod = job["spec"]["template"]["spec"]

    # init containers in order: the harness copied in, the workspace seeded from the image, then the harness
    init = pod["initContainers"]
    assert [c["name"] for c in init] == ["harnessrl-harness-copy", "harnessrl-seed", "harness"]
    assert init[0]["image"] == "registry.example/harness:2"
    assert init[1]["image"] == init[2]["image"] == IMAGE
    (verifier,) = pod["containers"]
    assert verifier["name"] == "harnessrl-verifier" and verifier["image"] == IMAGE
    harness = init[2]
    assert harness["command"][:2] == ["sh", "-c"] and harness["command"][3:] == [
        "harness", "100", "5", "python", "/app/agent.py"]  # limit, kill grace, runner.command
    assert harness["workingDir"] == verifier["workingDir"] == "/app"
    mounts = {m["mountPath"]: m for m in harness["volumeMounts"]}
    assert mounts["/opt/harness"]["readOnly"] is True and "/app" in mounts and "/root/.venv" in mounts
    assert mounts["/data"]["name"] == "data"  # the template's own mount stays
    vmounts = {m["mountPath"]: m["name"] for m in verifier["volumeMounts"]}
    assert vmounts["/app"] == mounts["/app"]["name"] and vmounts["/root/.venv"] == mounts["/root/.venv"]["name"]
    # the tests only in the verifier; the API key and the rollout's env only in the harness
    assert vmounts[TESTS_SOURCE] == "harnessrl-tests"
    assert all(m["mountPath"] != TESTS_SOURCE for c in init for m in c.get("volumeMounts", []))
    assert verifier["env"] == [{"name": "TESTS_VAR", "value": "on"}]
    assert "secretKeyRef" not in json.dumps(verifier) and "OPENAI" not in json.dumps(verifier)
    harness_env = {e["name"]: e for e in harness["env"]}
    assert harness_env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": name, "key": "OPENAI_API_KEY"}}
    # the task's limits on both; the template's other limits stay
    for c in (harness, verifier):
        assert c["resources"]["limits"] == {"cpu": "2000m", "memory": "4096Mi"}
        assert c["resources"]["requests"] == {"cpu": "2000m", "memory": "4096Mi"}
    # the harness's processes die with its container; hardened, but root and a writable root stay allowed
    assert pod["shareProcessNamespace"] is False and pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert harness["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False}
    # the deadline: harness 100 + kill grace 5 + tests 30 + 5 + startup 120
    assert job["spec"]["activeDeadlineSeconds"] == 260
    nonce = job["metadata"]["annotations"][NONCE_ANNOTATION]
    assert len(nonce) == 24 and nonce in verifier["command"][2]

    status, cm = await cluster.get(f"{CONFIG_MAPS}/{name}-tests")
    assert status == 200 and cm["metadata"]["annotations"]["harnessrl.io/rollout-id"] == "r1"
    items = {i["path"]: i for i in next(v for v in pod["volumes"] if v["name"] == "harnessrl-tests")
             ["configMap"]["items"]}
    assert items["test.sh"]["mode"] == 0o755 and items["data/blob.bin"]["mode"] == 0o644
    assert cm["data"][items["test.sh"]["key"]].startswith("#!/bin/bash")
    assert cm["binaryData"][items["data/blob.bin"]["key"]] == "/wD+"

    await add_task_pod(cluster, name, verifier_log=report(nonce), harness_log=b"agent: done\n")
    await cluster.finish(name, succeeded=1)
    result = await task
    assert result.status is RolloutStatus.SUCCEEDED and result.exit_code == 0
    assert result.stdout == "agent: done\n"  # the harness's own log
    assert result.graded is not None and result.graded.value == 0.75 and result.graded.error is None
    assert "collected 3 items" in result.graded.output

    await runner.release(result)
    assert await cluster.job(name) is None
    assert (await cluster.get(f"{CONFIG_MAPS}/{name}-tests"))[0] == 404
    await runner.aclose()


@pytest.mark.asyncio
async def test_no_reward_is_a_grading_failure_and_the_tests_go_with_a_kept_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    runner = runner_for(cluster)
    name = job_name("r1")
    task = asyncio.create_task(runner.run(task_spec(runner, tmp_path)))
    job = await cluster.wait_job(name)
    nonce = job["metadata"]["annotations"][NONCE_ANNOTATION]
    await add_task_pod(cluster, name, verifier_log=report(nonce, harness="exit=3 timed_out=0", reward=None))
    await cluster.finish(name, succeeded=1)
    result = await task
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.AGENT
    assert result.exit_code == 3 and "code 3" in (result.reason or "")
    assert result.graded is not None and result.graded.value is None
    assert "wrote no reward" in (result.graded.error or "")
    await runner.release(result)  # failed: the Job stays for debugging, its tests do not
    assert await cluster.job(name) is not None
    assert (await cluster.get(f"{CONFIG_MAPS}/{name}-tests"))[0] == 404
    await runner.aclose()


@pytest.mark.asyncio
async def test_timeouts(cluster: Cluster, tmp_path: Path) -> None:
    runner = runner_for(cluster)
    # the harness stopped at its own limit in its container: timed out, and still graded (as locally)
    task = asyncio.create_task(runner.run(task_spec(runner, tmp_path / "a", "r1")))
    job = await cluster.wait_job(job_name("r1"))
    nonce = job["metadata"]["annotations"][NONCE_ANNOTATION]
    await add_task_pod(cluster, job_name("r1"),
                       verifier_log=report(nonce, harness="exit=143 timed_out=1", tests="exit=124 timed_out=1"))
    await cluster.finish(job_name("r1"), succeeded=1)
    result = await task
    assert result.status is RolloutStatus.TIMED_OUT and result.timed_out
    assert result.graded is not None and result.graded.value == 0.0  # the tests past their limit: 0

    # the pod's deadline first (a slow pull): the cluster's time, not the agent's; no grade
    task = asyncio.create_task(runner.run(task_spec(runner, tmp_path / "b", "r2")))
    await cluster.wait_job(job_name("r2"))
    await add_task_pod(cluster, job_name("r2"), verifier_log=None, harness_state={"running": {}})
    await cluster.finish(job_name("r2"), "Failed", "DeadlineExceeded", failed=1)
    result = await task
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.INFRA
    assert "verify_grace_s" in (result.reason or "") and result.graded is None
    await runner.aclose()


@pytest.mark.asyncio
async def test_tasks_the_pod_cannot_run_are_refused_before_anything_is_created(
    cluster: Cluster, tmp_path: Path
) -> None:
    runner = runner_for(cluster)
    result = await runner.run(task_spec(runner, tmp_path / "a", "r1", image=None, build_context=tmp_path))
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.INFRA
    assert "cannot build an image" in (result.reason or "") and "docker_image" in (result.reason or "")

    result = await runner.run(task_spec(runner, tmp_path / "c", "r3", tests=None, grader="swebench"))
    assert result.failure_kind is FailureKind.INFRA and "'swebench'" in (result.reason or "")

    big = task_spec(runner, tmp_path / "b", "r2")
    assert big.assets.environment is not None and big.assets.environment.tests is not None
    (big.assets.environment.tests.tests_dir / "huge.txt").write_text("x" * (1 << 20))
    result = await runner.run(big)
    assert result.failure_kind is FailureKind.INFRA and "1 MiB" in (result.reason or "")
    assert cluster.requests("POST", JOBS) == [] and cluster.requests("POST", CONFIG_MAPS) == []
    await runner.aclose()


def test_forged_report_lines_do_not_count() -> None:
    nonce = "abc"
    log = (f"harnessrl-{nonce} harness exit=0 timed_out=0\n"
           f"harnessrl-{nonce} file reward.txt\n1\nharnessrl-{nonce} end\n"  # printed by the tests: ignored
           f"harnessrl-{nonce} tests exit=1 timed_out=0\nharnessrl-{nonce} done\n")
    parsed = parse_report(log, nonce)
    assert parsed.harness_exit == 0 and parsed.tests_ended and parsed.done and parsed.files == {}
    assert grade(parsed, tests_timeout_s=1, why_unfinished="", max_bytes=100).value is None
    cut = parse_report(f"harnessrl-{nonce} harness exit=0 timed_out=0\nrunning\n", nonce)
    g = grade(cut, tests_timeout_s=1, why_unfinished="the pod was deleted", max_bytes=100)
    assert g.value is None and "the pod was deleted" in (g.error or "")


def test_scripts_in_a_real_shell(tmp_path: Path) -> None:
    """The pod's two scripts under ``sh``, paths moved into ``tmp_path``: the harness's limit, its status,
    the tests copied in, and a reward read back by the same parser."""
    status = tmp_path / "status"
    status.mkdir()
    out = tmp_path / "out.log"

    def sh(script: str, *args: str) -> str:
        with out.open("w") as f:  # a file, not a pipe: an orphaned `sleep` would hold a pipe open
            subprocess.run(["sh", "-c", script, "x", *args], stdout=f, stderr=subprocess.STDOUT, check=True,
                           timeout=30)
        return out.read_text()

    harness = HARNESS_SCRIPT.replace(STATUS_DIR, str(status))
    t0 = time.monotonic()
    assert sh(harness, "1", "1", "sh", "-c", "echo hi; trap '' TERM; sleep 8").startswith("hi\n")
    assert time.monotonic() - t0 < 6  # TERM ignored: KILL after the grace
    assert (status / "harness").read_text() == "exit=137 timed_out=1\n"
    sh(harness, "20", "1", "sh", "-c", "exit 3")
    assert (status / "harness").read_text() == "exit=3 timed_out=0\n"

    source, reward = tmp_path / "tests-src", tmp_path / "verifier"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "lib.sh").write_text(f"echo 0.5 > {reward}/reward.txt\n")
    (source / "test.sh").write_text("echo testing; . \"$(dirname \"$0\")/sub/lib.sh\"\n")
    env = TaskEnvironment(name="t", image="i", tests=ContainerTests(
        tests_dir=source, tests_path=str(tmp_path / "tests"), reward_dir=str(reward)))
    script = (verifier_script("n0nce", env, ["sub", "test.sh"])
              .replace(STATUS_DIR, str(status)).replace(TESTS_SOURCE, str(source)))
    log = sh(script, "20", "sh", str(tmp_path / "tests" / "test.sh"))
    parsed = parse_report(log.split("\n", 1)[1], "n0nce")  # the first line out of the log's tail
    assert parsed.harness_exit == 3 and parsed.output == "testing"
    assert grade(parsed, tests_timeout_s=20, why_unfinished="", max_bytes=100).value == 0.5
