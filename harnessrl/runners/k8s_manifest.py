"""Pure functions from an attempt to Kubernetes objects and back: names, labels, the Job, its Secret.

Nothing here talks to a cluster, so every rule (naming, env precedence, what harnessrl overrides in the
user's template) is testable without one. The Job is built from the user's template, never from scratch:
image, resources, volumes, service account and scheduling stay theirs.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from harnessrl.runners.config import KubernetesConfig, RunnerConfig
from harnessrl.runners.env import task_input_env
from harnessrl.runners.k8s_task_pod import (
    TestFiles,
    check_task,
    harden_task_pod,
    shape_task_pod,
    task_deadline_s,
)
from harnessrl.runners.spec import AttemptSpec

GROUP = "harnessrl.io"
MANAGED_BY = "app.kubernetes.io/managed-by"
RUN_LABEL = f"{GROUP}/run"
ROLLOUT_LABEL = f"{GROUP}/rollout"
TASK_LABEL = f"{GROUP}/task"
#: Label values are cut to 63 characters; the exact ids live in annotations.
RUN_ANNOTATION = f"{GROUP}/run-id"
ROLLOUT_ANNOTATION = f"{GROUP}/rollout-id"
TASK_ANNOTATION = f"{GROUP}/task-id"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")  # set on pods by the Job controller
#: Marks the verifier's report lines of a task pod (``k8s_task_pod``); the harness never sees it.
NONCE_ANNOTATION = f"{GROUP}/verifier-nonce"

JsonDict = dict[str, Any]


class JobTemplateError(ValueError):
    """The configured Job template cannot be used (not YAML, not a Job, no container)."""


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def job_name(rollout_id: str, prefix: str = "hrl") -> str:
    """A DNS-1123 label (<= 63 chars) that is a pure function of the rollout id.

    Deterministic so that a restarted controller finds the Job of a rollout by name, and a retried
    create answers 409 instead of starting a second attempt. A digest of the exact id keeps ids that
    differ only in case or punctuation apart.
    """
    slug = re.sub(r"[^a-z0-9-]+", "-", rollout_id.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)[: 63 - len(prefix) - 10].strip("-")
    return "-".join(p for p in (prefix, slug, _digest(rollout_id)) if p)


def label_value(value: str) -> str:
    """A valid label value for any id: itself when it already is one, else a slug plus a digest."""
    if re.fullmatch(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?", value):
        return value
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", value)[:54]
    slug = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", slug)
    return f"{slug}-{_digest(value)}" if slug else _digest(value)


def run_selector(run_id: str) -> dict[str, str]:
    """The labels every Job of one run carries: the watch's label selector."""
    return {MANAGED_BY: "harnessrl", RUN_LABEL: label_value(run_id)}


def selector_string(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def load_template(cfg: KubernetesConfig) -> JsonDict:
    """The configured Job template (inline YAML, file, or a one-container Job running ``cfg.image``)."""
    if cfg.job_template and cfg.job_template_file:
        raise JobTemplateError("set job_template or job_template_file, not both")
    text = cfg.job_template
    if cfg.job_template_file:
        try:
            text = Path(cfg.job_template_file).expanduser().read_text()
        except OSError as exc:
            raise JobTemplateError(f"cannot read job_template_file: {exc}") from exc
    if not text:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "spec": {"template": {"spec": {"containers": [{"name": "harness", "image": cfg.image}]}}},
        }
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobTemplateError(f"job template is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind", "Job") != "Job":
        raise JobTemplateError("job template must be one batch/v1 Job (kind: Job)")
    if doc.get("apiVersion", "batch/v1") != "batch/v1":
        raise JobTemplateError(f"job template apiVersion must be batch/v1, not {doc.get('apiVersion')!r}")
    containers = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        raise JobTemplateError("job template needs spec.template.spec.containers with at least one container")
    harness_container(doc, cfg.container)  # fails early on a wrong container name
    return doc


def harness_container(job: JsonDict, name: str | None) -> JsonDict:
    containers = job["spec"]["template"]["spec"]["containers"]
    if name is None:
        return containers[0]
    for container in containers:
        if container.get("name") == name:
            return container
    found = [c.get("name") for c in containers]
    raise JobTemplateError(f"job template has no container named {name!r} (it has {found})")


def attempt_env(config: RunnerConfig, spec: AttemptSpec) -> dict[str, str]:
    """What the harness sees: configured extras < task input < the rollout's identity (wins).

    Unlike the local runner nothing is inherited from the controller (the image has its own PATH and
    HOME) and there is no task input file (no shared disk): the input is in HARNESSRL_TASK_INPUT.
    """
    env = dict(config.env)
    if config.task_input_env:
        env.update(task_input_env(spec.task_input, config.max_env_value_bytes))
    env.update(spec.env)
    return env


def identity(config: RunnerConfig, spec: AttemptSpec, run_id: str) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) of every object of one attempt: its Job, pod, Secret, ConfigMap, policy."""
    labels = {
        **config.kubernetes.labels,
        **run_selector(run_id),
        ROLLOUT_LABEL: label_value(spec.rollout_id),
        TASK_LABEL: label_value(spec.task_id),
    }
    annotations = {RUN_ANNOTATION: run_id, ROLLOUT_ANNOTATION: spec.rollout_id, TASK_ANNOTATION: spec.task_id}
    return labels, annotations


def attempt_deadline_s(config: RunnerConfig, spec: AttemptSpec) -> float:
    """The Job's ``activeDeadlineSeconds`` before rounding: the harness's timeout, or for a task pod
    also its tests' and startup (the harness's own limit is then enforced inside its container)."""
    if spec.assets.environment is None:
        return spec.timeout_s
    return task_deadline_s(config, spec)


def build_objects(
    config: RunnerConfig,
    template: JsonDict,
    spec: AttemptSpec,
    run_id: str,
    *,
    tests: TestFiles | None = None,
    nonce: str = "",
) -> tuple[JsonDict, JsonDict | None]:
    """(Job, Secret or None) for one attempt. The template is copied, never changed.

    With ``spec.assets.environment`` the pod runs the task's image (``k8s_task_pod``): ``tests`` are the
    task's tests as read for their ConfigMap, ``nonce`` marks the verifier's report (kept in the Job's
    annotations for reading it back).
    """
    k8s = config.kubernetes
    name = job_name(spec.rollout_id)
    labels, annotations = identity(config, spec, run_id)
    task_env = spec.assets.environment
    if task_env is not None:
        check_task(task_env)
        annotations = {**annotations, NONCE_ANNOTATION: nonce}
    job = copy.deepcopy(template)
    job["apiVersion"], job["kind"] = "batch/v1", "Job"
    meta = job.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta["name"], meta["namespace"] = name, k8s.namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}

    job_spec = job["spec"]
    job_spec["backoffLimit"] = 0  # one attempt is one pod: a retry would be a second, unrecorded attempt
    job_spec["activeDeadlineSeconds"] = max(1, math.ceil(attempt_deadline_s(config, spec)))
    job_spec["ttlSecondsAfterFinished"] = k8s.ttl_seconds_after_finished
    pod = job_spec["template"]
    pod_meta = pod.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_spec = pod["spec"]
    pod_spec["restartPolicy"] = "Never"
    if k8s.image_pull_secrets:
        have = [s.get("name") for s in pod_spec.get("imagePullSecrets") or []]
        extra = [{"name": s} for s in k8s.image_pull_secrets if s not in have]
        pod_spec["imagePullSecrets"] = [*(pod_spec.get("imagePullSecrets") or []), *extra]

    container = harness_container(job, k8s.container)
    if task_env is not None:
        shape_task_pod(pod_spec, container, config, spec, job=name, nonce=nonce, tests=tests)
        if k8s.harden:
            harden_task_pod(pod_spec)
    else:
        if k8s.harden:
            harden(pod_spec, container, k8s.writable_paths)
        if k8s.set_command:
            container["command"] = list(spec.command)
            container.pop("args", None)
        if k8s.image_pull_policy:
            container["imagePullPolicy"] = k8s.image_pull_policy

    env = attempt_env(config, spec)
    secret_names = [n for n in k8s.secret_env if n in env] if k8s.api_key_secret else []
    ours: list[JsonDict] = []
    for key, value in env.items():
        if key in secret_names:
            ref = {"secretKeyRef": {"name": name, "key": key}}
            ours.append({"name": key, "valueFrom": ref})
        else:
            ours.append({"name": key, "value": value})
    kept = [e for e in container.get("env") or [] if e.get("name") not in env]
    container["env"] = kept + ours

    secret = None
    if secret_names:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": k8s.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "stringData": {key: env[key] for key in secret_names},
        }
    return job, secret


#: Set on every container when ``harden``: what a harness needs none of.
HARDENED_CONTAINER: JsonDict = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
#: The uid (and gid) a hardened pod runs as when the template names none (distroless's "nonroot").
NON_ROOT_UID = 65532


def harden(pod_spec: JsonDict, harness: JsonDict, writable_paths: list[str]) -> None:
    """Non-root, read-only root, no capabilities, no service-account token; emptyDirs where it writes.

    The template's own stricter settings stay; settings that contradict these (root, privileged) are
    refused with the fix, rather than silently producing a pod that cannot start.
    """
    pod_spec["automountServiceAccountToken"] = False
    pod_sc = pod_spec.setdefault("securityContext", {})
    containers = [*(pod_spec.get("initContainers") or []), *pod_spec["containers"]]
    for c in [pod_sc, *(c.get("securityContext") or {} for c in containers)]:
        if c.get("runAsUser") == 0 or c.get("privileged"):
            raise JobTemplateError(
                "the job template runs a container as root or privileged, which [runner.kubernetes] harden "
                "forbids: remove runAsUser: 0 / privileged, or set harden = false"
            )
    pod_sc["runAsNonRoot"] = True
    pod_sc.setdefault("runAsUser", NON_ROOT_UID)
    pod_sc.setdefault("runAsGroup", NON_ROOT_UID)
    pod_sc.setdefault("fsGroup", NON_ROOT_UID)  # emptyDir volumes writable by that user
    pod_sc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    for c in containers:
        sc = c.setdefault("securityContext", {})
        sc.update(copy.deepcopy(HARDENED_CONTAINER))
    mounted = {m.get("mountPath") for m in harness.get("volumeMounts") or []}
    volumes = pod_spec.setdefault("volumes", [])
    for i, path in enumerate(p for p in writable_paths if p not in mounted):
        name = f"harnessrl-writable-{i}"
        volumes.append({"name": name, "emptyDir": {}})
        harness.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})


def gateway_address(spec: AttemptSpec) -> tuple[str, int]:
    """(host, port) of the gateway in the rollout's environment."""
    parts = urlsplit(spec.env.get("OPENAI_BASE_URL", ""))
    if not parts.hostname:
        raise JobTemplateError("the attempt has no gateway URL (OPENAI_BASE_URL) to allow in its NetworkPolicy")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def network_policy(config: RunnerConfig, spec: AttemptSpec, run_id: str) -> JsonDict | None:
    """The attempt's NetworkPolicy (named like its Job): nothing in; out only to the gateway and DNS.

    It selects the attempt's pod by its run and rollout labels, so attempts never share a policy.
    """
    k8s = config.kubernetes
    if not k8s.network_policy:
        return None
    host, port = gateway_address(spec)
    peers = list(k8s.gateway_peers)
    if not peers:
        try:
            ip = ipaddress.ip_address(host)
            peers = [{"ipBlock": {"cidr": f"{ip}/{ip.max_prefixlen}"}}]
        except ValueError:
            pass  # a host name: the port only (gateway_peers narrows it)
    to_gateway: JsonDict = {"ports": [{"protocol": "TCP", "port": port}]}
    if peers:
        to_gateway["to"] = peers
    egress = [to_gateway]
    if k8s.dns_peers:
        egress.append({"to": list(k8s.dns_peers),
                       "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]})
    labels = {**run_selector(run_id), ROLLOUT_LABEL: label_value(spec.rollout_id)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": job_name(spec.rollout_id),
            "namespace": k8s.namespace,
            "labels": {**labels, TASK_LABEL: label_value(spec.task_id)},
            "annotations": {RUN_ANNOTATION: run_id, ROLLOUT_ANNOTATION: spec.rollout_id,
                            TASK_ANNOTATION: spec.task_id},
        },
        "spec": {
            "podSelector": {"matchLabels": labels},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }


def is_ours(obj: Mapping[str, Any], run_id: str, rollout_id: str) -> bool:
    """Whether an existing object (found by name) is this run's object for this rollout."""
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    return ann.get(ROLLOUT_ANNOTATION) == rollout_id and ann.get(RUN_ANNOTATION) == run_id


def owner_reference(job: Mapping[str, Any]) -> JsonDict | None:
    """An ownerReference to the Job (so the Secret is garbage-collected with it), if it has a uid."""
    meta = job.get("metadata") or {}
    if not meta.get("uid"):
        return None
    return {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"]}
