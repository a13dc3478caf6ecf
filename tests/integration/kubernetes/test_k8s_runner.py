"""The Kubernetes runner against a real HTTP Kubernetes API (kmock): the Job it creates, how it reads
the Job's end, cancel, restart re-attachment, and API errors as ``infra`` failures."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from k8s_cluster import JOBS, NS, POLICIES, SECRETS, Cluster, Fault, k8s_config, spec

from harnessrl.runners import RunnerError, make_runner
from harnessrl.runners.k8s_manifest import job_name
from harnessrl.runners.kubernetes import KubernetesRunner
from harnessrl.types import FailureKind, RolloutStatus

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


def runner_for(cluster: Cluster, run_id: str = "run-1", **over: Any) -> KubernetesRunner:
    runner = make_runner(k8s_config(cluster.url, **over), run_id=run_id)
    assert isinstance(runner, KubernetesRunner)
    return runner


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


async def test_job_body_identity_and_success(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    runner = runner_for(cluster, timeout_s=90.5)
    s = spec(runner.config, "Roll_Out.1", task_input={"question": "2+2?", "n": 3})
    name = job_name("Roll_Out.1")
    handles: list[str] = []
    task = asyncio.create_task(runner.run(s, on_start=handles.append))
    job = await cluster.wait_job(name)

    meta, pod = job["metadata"], job["spec"]["template"]
    assert meta["labels"]["harnessrl.io/run"] == "run-1"
    assert meta["labels"]["harnessrl.io/rollout"] == "Roll_Out.1"
    assert meta["labels"]["harnessrl.io/task"] == "t1"
    assert meta["labels"]["team"] == "rl"  # the template's own labels stay
    assert meta["annotations"]["harnessrl.io/rollout-id"] == "Roll_Out.1"
    assert pod["metadata"]["labels"]["harnessrl.io/rollout"] == "Roll_Out.1"
    assert job["spec"]["backoffLimit"] == 0  # overrides the template's 6
    assert job["spec"]["activeDeadlineSeconds"] == 91
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["serviceAccountName"] == "harness"
    assert pod["spec"]["volumes"] == [{"name": "data", "emptyDir": {}},
                                      {"name": "harnessrl-writable-0", "emptyDir": {}}]  # /tmp
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["python", "/app/agent.py"] and "args" not in container
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert container["volumeMounts"][-1] == {"name": "harnessrl-writable-0", "mountPath": "/tmp"}
    # hardened: non-root, read-only root, no capabilities, no service-account token
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                              "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"] == {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                            "privileged": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    # its own NetworkPolicy, created before the Job: nothing in, out only to the gateway's port and DNS
    status, policy = await cluster.get(f"{POLICIES}/{name}")
    assert status == 200 and policy["metadata"]["annotations"]["harnessrl.io/rollout-id"] == "Roll_Out.1"
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["podSelector"]["matchLabels"]["harnessrl.io/rollout"] == "Roll_Out.1"
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and policy["spec"]["ingress"] == []
    to_gateway, dns = policy["spec"]["egress"]
    assert to_gateway == {"ports": [{"protocol": "TCP", "port": 8000}]}  # a host name: the port only
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    creates = [r.url.path for r in cluster.km._requests if r.method.value.upper() == "POST"]
    assert creates.index(POLICIES) < creates.index(JOBS)
    assert "rollout pods may reach port 8000 of any address" in caplog.text

    env = env_of(job)
    root = "http://gateway.harnessrl.svc:8000/r/Roll_Out.1"
    assert env["OPENAI_BASE_URL"] == f"{root}/v1"
    assert env["ANTHROPIC_BASE_URL"] == root
    assert env["HARNESSRL_REWARD_URL"] == f"{root}/reward"
    assert json.loads(env["HARNESSRL_TASK_INPUT"]) == {"question": "2+2?", "n": 3}
    assert env["HARNESSRL_TASK_QUESTION"] == "2+2?"
    assert env["FROM_TEMPLATE"] == "1"
    assert env["OPENAI_API_KEY"] == {"secretKeyRef": {"name": name, "key": "OPENAI_API_KEY"}}
    assert env["ANTHROPIC_API_KEY"] == {"secretKeyRef": {"name": name, "key": "ANTHROPIC_API_KEY"}}
    assert "key-Roll_Out.1-secret" not in json.dumps(job)  # the key is only in the Secret
    status, secret = await cluster.get(f"{SECRETS}/{name}")
    assert status == 200 and secret["stringData"]["OPENAI_API_KEY"] == "key-Roll_Out.1-secret"

    await cluster.add_pod(name, exit_code=0, log=b"thinking\nanswer: 4\n")
    await cluster.finish(name, succeeded=1)
    result = await task
    assert result.status is RolloutStatus.SUCCEEDED and result.failure_kind is None
    assert result.exit_code == 0
    assert result.stdout.endswith("answer: 4\n") and result.stdout_bytes == 19
    assert handles == [f"k8s:{NS}/{name}"] and result.handle == handles[0]
    assert "key-Roll_Out.1-secret" not in caplog.text

    await runner.release(result)  # succeeded: Job, Secret and NetworkPolicy go now, not at the TTL
    assert await cluster.job(name) is None
    assert (await cluster.get(f"{SECRETS}/{name}"))[0] == 404
    assert (await cluster.get(f"{POLICIES}/{name}"))[0] == 404
    await runner.aclose()


async def test_inline_key_when_secrets_are_off(cluster: Cluster) -> None:
    runner = runner_for(cluster, api_key_secret=False)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    job = await cluster.wait_job(job_name("r1"))
    assert env_of(job)["OPENAI_API_KEY"] == "key-r1-secret"
    assert cluster.requests("POST", SECRETS) == []
    await cluster.finish(job_name("r1"), succeeded=1)
    assert (await task).status is RolloutStatus.SUCCEEDED
    await runner.aclose()


async def test_nonzero_exit_is_an_agent_failure(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    await cluster.add_pod(name, exit_code=3, log=b"Traceback: boom\n")
    await cluster.finish(name, "Failed", "BackoffLimitExceeded", failed=1)
    result = await task
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.AGENT
    assert result.exit_code == 3 and "code 3" in (result.reason or "")
    assert "boom" in result.stdout
    await runner.release(result)  # failed Jobs stay for debugging (keep_jobs = "failed"); the key goes
    assert await cluster.job(name) is not None
    assert (await cluster.get(f"{SECRETS}/{name}"))[0] == 404
    await runner.aclose()


async def test_deadline_after_start_is_timed_out(cluster: Cluster) -> None:
    runner = runner_for(cluster, timeout_s=5)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    await cluster.set_job_status(name, {"active": 1, "ready": 1})  # the harness ran
    await asyncio.sleep(0.1)
    await cluster.finish(name, "Failed", "DeadlineExceeded", failed=1)
    result = await task
    assert result.status is RolloutStatus.TIMED_OUT and result.failure_kind is FailureKind.AGENT
    assert result.timed_out and "timeout of 5s" in (result.reason or "")
    await runner.aclose()


@pytest.mark.parametrize("pod_waiting", [None, "ImagePullBackOff"])
async def test_deadline_before_start_is_infra(cluster: Cluster, pod_waiting: str | None) -> None:
    runner = runner_for(cluster, timeout_s=5)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    if pod_waiting:
        await cluster.add_pod(name, waiting=pod_waiting, phase="Pending")
    await cluster.finish(name, "Failed", "DeadlineExceeded", failed=1)
    result = await task
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.INFRA
    assert "never started" in (result.reason or "")
    if pod_waiting:
        assert pod_waiting in (result.reason or "")
    await runner.aclose()


async def test_evicted_pod_is_infra(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    await cluster.add_pod(name, exit_code=137, reason="Evicted", message="low on memory")
    await cluster.finish(name, "Failed", "BackoffLimitExceeded", failed=1)
    result = await task
    assert result.failure_kind is FailureKind.INFRA and "Evicted" in (result.reason or "")
    await runner.aclose()


async def test_cancel_deletes_the_job(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    assert runner.active() == ["r1"]
    assert await runner.cancel("r1")
    result = await task
    assert result.status is RolloutStatus.CANCELLED and result.failure_kind is FailureKind.INFRA
    deletes = cluster.requests("DELETE", f"{JOBS}/{name}")
    assert len(deletes) == 1 and deletes[0].params.get("propagationPolicy") == "Background"
    assert await cluster.job(name) is None
    assert (await cluster.get(f"{SECRETS}/{name}"))[0] == 404
    assert runner.active() == [] and not await runner.cancel("r1")
    await runner.aclose()


async def test_cancelling_the_task_deletes_the_job(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(job_name("r1"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await cluster.job(job_name("r1")) is None
    await runner.aclose()


async def test_job_deleted_by_someone_else_is_infra(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    await asyncio.sleep(0.1)  # the watch has seen it
    async with cluster.http.delete(f"{cluster.url}{JOBS}/{name}") as resp:
        assert resp.status == 200
    result = await task
    assert result.failure_kind is FailureKind.INFRA and "deleted" in (result.reason or "")
    await runner.aclose()


async def test_detach_while_a_job_is_being_created_leaves_it_running(cluster: Cluster) -> None:
    """Detach lands after the Job exists but before its create was answered (a slow API server): the
    attempt ends as detached, not on a watcher that detach already dropped."""
    runner = runner_for(cluster)
    name = job_name("r1")
    cluster.km.faults.append(Fault("POST", JOBS, None, delay_s=0.5))
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(name)
    await runner.detach()
    with pytest.raises(RunnerError, match="detached"):
        await task
    assert cluster.km.faults[0].hits == 1  # detach did land while the launch was in flight
    assert await cluster.job(name) is not None


async def test_restart_reattaches_instead_of_relaunching(cluster: Cluster) -> None:
    first = runner_for(cluster)
    running = asyncio.create_task(first.run(spec(first.config, "r1")))
    done = asyncio.create_task(first.run(spec(first.config, "r2")))
    await cluster.wait_job(job_name("r1"))
    await cluster.wait_job(job_name("r2"))
    await first.detach()  # the controller goes away; the Jobs keep running
    for task in (running, done):
        with pytest.raises(RunnerError, match="detached"):
            await task
    assert await cluster.job(job_name("r1")) is not None
    await cluster.add_pod(job_name("r2"), exit_code=0, log=b"done while nobody watched\n")
    await cluster.finish(job_name("r2"), succeeded=1)  # finishes while no controller watches

    second = runner_for(cluster)  # same run id, fresh process
    assert set(await second.existing()) == {"r1", "r2"}
    started: list[str] = []
    r2 = await second.run(spec(second.config, "r2"))
    assert r2.status is RolloutStatus.SUCCEEDED and "nobody watched" in r2.stdout
    task = asyncio.create_task(second.run(spec(second.config, "r1"), on_start=started.append))
    await asyncio.sleep(0.2)
    assert started == [f"k8s:{NS}/{job_name('r1')}"]
    await cluster.finish(job_name("r1"), succeeded=1)
    assert (await task).status is RolloutStatus.SUCCEEDED
    assert len(cluster.requests("POST", JOBS)) == 2  # one per rollout, none relaunched
    await second.aclose()


@pytest.mark.parametrize("other_has_secret", [True, False])
async def test_other_runs_job_with_the_same_name_is_not_ours(
    cluster: Cluster, other_has_secret: bool
) -> None:
    other = runner_for(cluster, run_id="another-run", api_key_secret=other_has_secret)
    task = asyncio.create_task(other.run(spec(other.config, "r1")))
    name = job_name("r1")
    await cluster.wait_job(name)
    ours = runner_for(cluster, run_id="run-1")
    result = await ours.run(spec(ours.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA
    assert f"named {name} exists and belongs to another run" in (result.reason or "")
    assert await cluster.job(name) is not None  # never deleted someone else's Job
    secret = (await cluster.get(f"{SECRETS}/{name}"))[1]
    if other_has_secret:  # theirs, untouched
        assert secret["metadata"]["annotations"]["harnessrl.io/run-id"] == "another-run"
    else:  # the NetworkPolicy's 409 came first: ours was never made
        assert secret.get("kind") == "Status"
    policy = (await cluster.get(f"{POLICIES}/{name}"))[1]  # theirs, untouched
    assert policy["metadata"]["annotations"]["harnessrl.io/run-id"] == "another-run"
    await other.aclose()
    assert (await task).status is RolloutStatus.CANCELLED
    await ours.aclose()


async def test_leftover_secret_of_ours_gets_the_new_key(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    name = job_name("r1")
    stale = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"harnessrl.io/run-id": "run-1", "harnessrl.io/rollout-id": "r1"},
        },
        "stringData": {"OPENAI_API_KEY": "old-key"},
    }
    await cluster.create(SECRETS, stale)  # a controller crashed between the Secret and the Job
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(name)
    secret = (await cluster.get(f"{SECRETS}/{name}"))[1]
    assert secret["stringData"]["OPENAI_API_KEY"] == "key-r1-secret"
    await cluster.finish(name, succeeded=1)
    assert (await task).status is RolloutStatus.SUCCEEDED
    await runner.aclose()


async def test_invalid_template_422_is_infra(cluster: Cluster) -> None:
    cluster.km.faults.append(Fault("POST", JOBS, 422))
    runner = runner_for(cluster)
    result = await runner.run(spec(runner.config, "r1"))
    assert result.status is RolloutStatus.FAILED and result.failure_kind is FailureKind.INFRA
    assert "422" in (result.reason or "") and "job template" in (result.reason or "")
    assert len(cluster.requests("POST", JOBS)) == 1  # not retried
    assert cluster.requests("DELETE", f"{SECRETS}/{job_name('r1')}")  # the key does not outlive it
    assert (await cluster.get(f"{POLICIES}/{job_name('r1')}"))[0] == 404  # nor the policy
    await runner.aclose()


async def test_another_runs_network_policy_with_the_same_name_is_infra(cluster: Cluster) -> None:
    foreign = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": job_name("r1"), "namespace": NS,
                            "annotations": {"harnessrl.io/run-id": "other", "harnessrl.io/rollout-id": "r1"}},
               "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}}
    await cluster.create(POLICIES, foreign)
    runner = runner_for(cluster)
    result = await runner.run(spec(runner.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA and "belongs to another run" in (result.reason or "")
    assert cluster.requests("POST", JOBS) == []  # never launched without its own policy
    await runner.aclose()


async def test_policy_and_hardening_can_be_turned_off(cluster: Cluster) -> None:
    runner = runner_for(cluster, network_policy=False, harden=False)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    job = await cluster.wait_job(job_name("r1"))
    assert cluster.requests("POST", POLICIES) == []
    pod_spec = job["spec"]["template"]["spec"]
    assert "securityContext" not in pod_spec and "automountServiceAccountToken" not in pod_spec
    await cluster.finish(job_name("r1"), succeeded=1)
    assert (await task).status is RolloutStatus.SUCCEEDED
    await runner.aclose()


async def test_api_messages_never_carry_the_key(cluster: Cluster) -> None:
    message = 'Job.batch "x" is invalid: env[1].value: Invalid value: "key-r1-secret"'
    cluster.km.faults.append(Fault("POST", JOBS, 422, message=message))
    runner = runner_for(cluster, api_key_secret=False)
    result = await runner.run(spec(runner.config, "r1"))
    assert "[REDACTED]" in (result.reason or "") and "key-r1-secret" not in (result.reason or "")
    await runner.aclose()


async def test_kubeconfig_credentials(cluster: Cluster, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: mock, cluster: {{server: "{cluster.url}"}}}}]
users: [{{name: me, user: {{token: user-token}}}}]
contexts: [{{name: mock, context: {{cluster: mock, user: me}}}}]
current-context: mock
"""
    )
    runner = runner_for(cluster, api_server=None, auth="kubeconfig", kubeconfig=str(kubeconfig))
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(job_name("r1"))
    assert cluster.requests("POST", JOBS)[0].headers.get("Authorization") == "Bearer user-token"
    await cluster.finish(job_name("r1"), succeeded=1)
    assert (await task).status is RolloutStatus.SUCCEEDED
    await runner.aclose()


async def test_lost_create_answer_500_then_409_attaches(cluster: Cluster) -> None:
    cluster.km.faults.append(Fault("POST", JOBS, 500, after=True))  # created, but the answer is a 500
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(job_name("r1"))
    await asyncio.sleep(0.2)
    await cluster.finish(job_name("r1"), succeeded=1)
    result = await task
    assert result.status is RolloutStatus.SUCCEEDED
    assert len(cluster.requests("POST", JOBS)) == 2  # the retry met 409 and attached to the first
    await runner.aclose()


async def test_persistent_500_is_infra_after_bounded_retries(cluster: Cluster) -> None:
    cluster.km.faults.append(Fault("POST", JOBS, 500, times=100))
    runner = runner_for(cluster, api_retries=2)
    result = await runner.run(spec(runner.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA and "after 3 attempts" in (result.reason or "")
    assert len(cluster.requests("POST", JOBS)) == 3
    await runner.aclose()


async def test_forbidden_403_says_which_permissions(cluster: Cluster) -> None:
    cluster.km.faults.append(Fault("POST", SECRETS, 403))
    runner = runner_for(cluster)
    result = await runner.run(spec(runner.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA and "create/get/list/watch/delete" in (
        result.reason or ""
    )
    assert cluster.requests("POST", JOBS) == []
    await runner.aclose()


async def test_api_unreachable_is_infra() -> None:
    runner = make_runner(k8s_config("http://127.0.0.1:9", api_retries=1), run_id="x")
    started = time.monotonic()
    result = await runner.run(spec(runner.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA and "cannot list Jobs" in (result.reason or "")
    assert time.monotonic() - started < 10
    await runner.aclose()


@pytest.mark.parametrize("as_event", [False, True])
async def test_watch_expiry_410_relists(cluster: Cluster, as_event: bool) -> None:
    cluster.km.faults.append(Fault("GET", JOBS, 410, watch=True, event=as_event))
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(job_name("r1"))
    await asyncio.sleep(0.2)
    await cluster.finish(job_name("r1"), succeeded=1)
    result = await task
    assert result.status is RolloutStatus.SUCCEEDED
    assert cluster.km.faults[0].hits == 1
    assert runner._watcher is not None and runner._watcher.lists >= 2  # expired watch -> list again
    assert len(cluster.requests("GET", JOBS)) >= 4  # list, watch (410), list, watch
    await runner.aclose()


async def test_creation_rate_limit(cluster: Cluster) -> None:
    runner = runner_for(cluster, creations_per_s=5.0, creation_burst=1)
    tasks = [asyncio.create_task(runner.run(spec(runner.config, f"r{i}"))) for i in range(3)]
    for i in range(3):
        await cluster.wait_job(job_name(f"r{i}"))
    creates = [t for t, method, path in cluster.km.arrivals if method == "POST" and path == SECRETS]
    assert len(creates) == 3
    assert creates[2] - creates[0] >= 0.3  # 1 at once, then 5/s: two gaps of 0.2 s
    watches = [r for r in cluster.requests("GET", JOBS) if r.params.get("watch")]
    assert len(watches) == 1  # one watch for the run, not one per attempt (and no polling)
    selector = watches[0].params["labelSelector"]
    assert selector == "app.kubernetes.io/managed-by=harnessrl,harnessrl.io/run=run-1"
    for i in range(3):
        await cluster.finish(job_name(f"r{i}"), succeeded=1)
    assert all(r.status is RolloutStatus.SUCCEEDED for r in await asyncio.gather(*tasks))
    await runner.aclose()


async def test_concurrency_caps_existing_jobs(cluster: Cluster) -> None:
    runner = runner_for(cluster, concurrency=1)
    first = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    second = asyncio.create_task(runner.run(spec(runner.config, "r2")))
    await cluster.wait_job(job_name("r1"))
    await asyncio.sleep(0.3)
    assert await cluster.job(job_name("r2")) is None  # waits for the slot
    await cluster.finish(job_name("r1"), succeeded=1)
    await first
    await cluster.wait_job(job_name("r2"))
    await cluster.finish(job_name("r2"), succeeded=1)
    assert (await second).status is RolloutStatus.SUCCEEDED
    await runner.aclose()


async def test_no_end_after_deadline_and_grace_deletes_the_job(cluster: Cluster) -> None:
    runner = runner_for(cluster, timeout_s=0.3, deadline_grace_s=0.3)  # a Job controller that never acts
    result = await runner.run(spec(runner.config, "r1"))
    assert result.failure_kind is FailureKind.INFRA and "reported no end" in (result.reason or "")
    assert await cluster.job(job_name("r1")) is None
    await runner.aclose()


async def test_aclose_deletes_active_jobs(cluster: Cluster) -> None:
    runner = runner_for(cluster)
    task = asyncio.create_task(runner.run(spec(runner.config, "r1")))
    await cluster.wait_job(job_name("r1"))
    await runner.aclose()
    assert (await task).status is RolloutStatus.CANCELLED
    assert await cluster.job(job_name("r1")) is None
