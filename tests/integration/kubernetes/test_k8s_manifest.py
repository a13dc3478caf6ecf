"""Pure parts of the Kubernetes runner (no server): names, labels, the template, outcome rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from k8s_cluster import GW

from harnessrl.runners import RunnerConfig, make_attempt_spec
from harnessrl.runners.config import KubernetesConfig
from harnessrl.runners.k8s_manifest import (
    JobTemplateError,
    build_objects,
    job_name,
    label_value,
    load_template,
    network_policy,
)
from harnessrl.runners.k8s_status import classify
from harnessrl.types import FailureKind, RolloutStatus

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ROLLOUT_IDS = st.from_regex(r"[A-Za-z0-9._-]{1,200}", fullmatch=True)


@given(ROLLOUT_IDS)
def test_job_names_are_dns_labels_and_deterministic(rid: str) -> None:
    name = job_name(rid)
    assert DNS1123_LABEL.fullmatch(name) and len(name) <= 63
    assert job_name(rid) == name


@given(ROLLOUT_IDS, ROLLOUT_IDS)
def test_distinct_ids_get_distinct_names(a: str, b: str) -> None:
    if a != b:
        assert job_name(a) != job_name(b)  # "A_b" and "a-b" slug alike; the digest keeps them apart


@given(st.text(max_size=300))
def test_label_values_are_valid_and_keep_simple_ids(value: str) -> None:
    out = label_value(value)
    assert LABEL_VALUE.fullmatch(out) and len(out) <= 63
    if LABEL_VALUE.fullmatch(value) and len(value) <= 63:
        assert out == value


def test_template_errors_are_clear(tmp_path) -> None:
    with pytest.raises(JobTemplateError, match="kind: Job"):
        load_template(KubernetesConfig(job_template="kind: Pod\nspec: {}"))
    with pytest.raises(JobTemplateError, match="containers"):
        load_template(KubernetesConfig(job_template="kind: Job\nspec: {template: {spec: {}}}"))
    with pytest.raises(JobTemplateError, match="no container named 'agent'"):
        load_template(
            KubernetesConfig(
                job_template="spec: {template: {spec: {containers: [{name: c, image: i}]}}}",
                container="agent",
            )
        )
    with pytest.raises(JobTemplateError, match="cannot read"):
        load_template(KubernetesConfig(job_template_file=str(tmp_path / "missing.yaml")))
    default = load_template(KubernetesConfig(image="me/harness:2"))
    assert default["spec"]["template"]["spec"]["containers"][0]["image"] == "me/harness:2"


def test_env_precedence_identity_wins_and_nothing_is_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/root-of-the-controller")
    config = RunnerConfig(
        kind="kubernetes",
        env={"OPENAI_BASE_URL": "http://wrong", "EXTRA": "1"},
        kubernetes=KubernetesConfig(api_key_secret=False, labels={"harnessrl.io/run": "spoof", "team": "a"}),
    )
    spec = make_attempt_spec(
        config, rollout_id="r1", task_id="t/1", task_input={"q": "x"}, gateway_url=GW, api_key="k"
    )
    job, secret = build_objects(config, load_template(config.kubernetes), spec, run_id="run 1")
    assert secret is None
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OPENAI_BASE_URL"] == f"{GW}/r/r1/v1" and env["EXTRA"] == "1" and env["OPENAI_API_KEY"] == "k"
    assert "HOME" not in env and "PATH" not in env
    labels = job["metadata"]["labels"]
    assert labels["team"] == "a" and labels["harnessrl.io/run"] == label_value("run 1") != "spoof"
    assert LABEL_VALUE.fullmatch(labels["harnessrl.io/task"])
    assert job["metadata"]["annotations"]["harnessrl.io/task-id"] == "t/1"


FAILED = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}


def test_deadline_without_any_evidence_is_the_agents() -> None:
    """After a re-attach we did not watch the start: a timeout is not turned into infra on a guess."""
    out = classify(FAILED, None, container=None, timeout_s=10, seen_ready=False, seen_from_creation=False)
    assert out.status is RolloutStatus.TIMED_OUT and out.failure_kind is FailureKind.AGENT


def test_oom_killed_is_the_agents_with_its_reason() -> None:
    job = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    pod = {
        "status": {
            "containerStatuses": [
                {"name": "harness", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            ]
        }
    }
    out = classify(job, pod, container="harness", timeout_s=10, seen_ready=True, seen_from_creation=True)
    assert (
        out.failure_kind is FailureKind.AGENT and out.exit_code == 137 and "OOMKilled" in (out.reason or "")
    )


def _spec(config: RunnerConfig, gateway: str = GW):
    return make_attempt_spec(config, rollout_id="r1", task_id="t1", task_input={}, gateway_url=gateway,
                             api_key="k")


def test_network_policy_peers_ip_gateway_and_switches() -> None:
    config = RunnerConfig(kind="kubernetes")
    egress = network_policy(config, _spec(config, "http://10.0.3.7:8400"), "run")["spec"]["egress"]
    assert egress[0] == {"ports": [{"protocol": "TCP", "port": 8400}], "to": [{"ipBlock": {"cidr": "10.0.3.7/32"}}]}
    peers = [{"podSelector": {"matchLabels": {"app": "harnessrl-gateway"}}}]
    config = RunnerConfig(kind="kubernetes", kubernetes=KubernetesConfig(gateway_peers=peers, dns_peers=[]))
    assert network_policy(config, _spec(config), "run")["spec"]["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 8000}], "to": peers}]  # no DNS rule when dns_peers = []
    config = RunnerConfig(kind="kubernetes", kubernetes=KubernetesConfig(network_policy=False))
    assert network_policy(config, _spec(config), "run") is None


@pytest.mark.parametrize("context", [{"runAsUser": 0}, {"privileged": True}])
def test_hardening_refuses_a_root_or_privileged_template(context: dict) -> None:
    template = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
        "containers": [{"name": "h", "image": "i", "securityContext": context}]}}}}
    config = RunnerConfig(kind="kubernetes")
    with pytest.raises(JobTemplateError, match="harden = false"):
        build_objects(config, template, _spec(config), "run")
    loose = RunnerConfig(kind="kubernetes", kubernetes=KubernetesConfig(harden=False))
    job, _ = build_objects(loose, template, _spec(loose), "run")
    assert job["spec"]["template"]["spec"]["containers"][0]["securityContext"] == context


def test_hardening_keeps_the_templates_user_and_mounts() -> None:
    template = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
        "securityContext": {"runAsUser": 1000},
        "containers": [{"name": "h", "image": "i", "volumeMounts": [{"name": "t", "mountPath": "/tmp"}]}],
        "volumes": [{"name": "t", "emptyDir": {"medium": "Memory"}}]}}}}
    config = RunnerConfig(kind="kubernetes", kubernetes=KubernetesConfig(writable_paths=["/tmp", "/work"]))
    job, _ = build_objects(config, template, _spec(config), "run")
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["runAsNonRoot"] is True
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == ["/tmp", "/work"]
    assert template["spec"]["template"]["spec"]["securityContext"] == {"runAsUser": 1000}  # copied, not changed
