"""From a finished Job (its newest pod, its log) or a refused API call to an ``AttemptResult``.

Results never carry a local workspace (``workdir`` is None): the harness worked inside its pod.
Kubernetes merges stdout and stderr into one log, so the log tail is ``stdout`` and ``stderr`` holds
harnessrl's own notes (e.g. why no log could be read).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from harnessrl.runners.k8s_api import Api, KubernetesApiError
from harnessrl.runners.k8s_manifest import JOB_NAME_LABELS
from harnessrl.runners.k8s_status import JobOutcome
from harnessrl.runners.spec import AttemptResult, AttemptSpec, unfinished_result
from harnessrl.types import FailureKind, RolloutStatus

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class LogTail:
    text: str
    bytes_read: int
    note: str = ""


async def newest_pod(api: Api, namespace: str, job: str) -> JsonDict | None:
    """The Job's newest pod, if any is left (TTL and the Job controller may have removed it)."""
    try:
        body = await api.call(
            f"list pods of Job {job}",
            api.core.list_namespaced_pod,
            namespace,
            label_selector=f"{JOB_NAME_LABELS[0]}={job}",
        )
    except KubernetesApiError as exc:
        logger.warning("cannot read the pod of Job %s: %s", job, exc)
        return None
    pods = [
        p
        for p in body.get("items") or []
        if any(((p.get("metadata") or {}).get("labels") or {}).get(k) == job for k in JOB_NAME_LABELS)
    ]
    pods.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    return pods[-1] if pods else None


async def read_log(
    api: Api, namespace: str, pod: JsonDict, container: str | None, tail_lines: int
) -> tuple[bytes | None, str]:
    """(the last ``tail_lines`` lines of one container's log, or None with harnessrl's note why not)."""
    name = pod["metadata"]["name"]
    try:
        data: bytes = await api.call(
            f"read log of pod {name}",
            api.core.read_namespaced_pod_log,
            name,
            namespace,
            container=container,
            tail_lines=tail_lines,
            raw=True,
        )
    except KubernetesApiError as exc:
        return None, f"pod logs unavailable: {exc}"
    return data, ""


async def log_tail(
    api: Api, namespace: str, pod: JsonDict | None, container: str | None, tail_lines: int, max_bytes: int
) -> LogTail:
    """The last ``tail_lines`` lines of the harness container's log, cut to ``max_bytes``."""
    if pod is None:
        return LogTail("", 0, "harnessrl: no pod left to read logs from\n")
    data, note = await read_log(api, namespace, pod, container, tail_lines)
    if data is None:
        return LogTail("", 0, f"harnessrl: {note}\n")
    tail = data[-max_bytes:] if max_bytes else b""
    return LogTail(tail.decode("utf-8", errors="replace"), len(data))


def explain(exc: KubernetesApiError, namespace: str) -> str:
    """The API's message plus what to do about it."""
    hint = {
        422: " Fix the [runner.kubernetes] job template: Kubernetes refused the Job as invalid.",
        400: " Fix the [runner.kubernetes] job template.",
        403: f" The credentials need create/get/list/watch/delete on jobs and secrets, create/get/patch/delete "
        f"on networkpolicies (and on configmaps, for tasks with their own image and tests) and get/list on pods and pods/log in namespace {namespace!r} (or a quota is "
        "exhausted).",
        404: f" Does namespace {namespace!r} exist?",
        409: " Delete it, or use another run id.",
    }.get(exc.status, "")
    return f"Kubernetes API error: {exc}.{hint}".replace("..", ".")


def redact(text: str, spec: AttemptSpec, names: list[str]) -> str:
    """An API message may quote the object it refused (e.g. an env value): never pass a key on."""
    for name in names:
        value = spec.env.get(name)
        if value:
            text = text.replace(value, "[REDACTED]")
    return text


def infra_result(
    spec: AttemptSpec,
    status: RolloutStatus,
    kind: FailureKind | None,
    reason: str,
    started: float | None = None,
    handle: str | None = None,
) -> AttemptResult:
    """A result for an attempt that did not run to a Job's end (API error, cancel, lost Job)."""
    return unfinished_result(spec, status, kind, reason, started=started, handle=handle)


def outcome_result(
    spec: AttemptSpec, outcome: JobOutcome, handle: str, started: float, tail: LogTail
) -> AttemptResult:
    """The result of a Job that ran to its end, with its log tail."""
    return AttemptResult(
        rollout_id=spec.rollout_id,
        status=outcome.status,
        failure_kind=outcome.failure_kind,
        reason=outcome.reason,
        exit_code=outcome.exit_code,
        timed_out=outcome.timed_out,
        stdout=tail.text,
        stderr=tail.note,
        stdout_bytes=tail.bytes_read,
        stderr_bytes=len(tail.note.encode()),
        duration_s=time.monotonic() - started,
        attempt_dir=None,
        workdir=None,
        handle=handle,
    )
