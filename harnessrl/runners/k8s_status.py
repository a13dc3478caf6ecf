"""Reading a finished Job (and its pod) as an attempt outcome, following the policy in ``spec.py``.

The one Kubernetes-specific subtlety is *whose fault* a failure is. A Job fails for the harness's
reasons (non-zero exit, its own deadline) but also for the cluster's (image pull, unschedulable pod,
eviction, preemption). The latter are ``infra``: they must never become a reward of 0.

========================================================  ===========  =======  =======================
Job / pod                                                 status       kind     note
========================================================  ===========  =======  =======================
condition Complete                                        succeeded    —        exit code from the pod
Failed, DeadlineExceeded, the harness had started          timed_out    agent    ran past ``timeout_s``
Failed, DeadlineExceeded, the container never started     failed       infra    pull, scheduling, config
Failed, pod evicted / preempted / node lost               failed       infra    DisruptionTarget etc.
Failed, anything else (BackoffLimitExceeded: exit != 0)   failed       agent    exit code from the pod
Job deleted by someone else while running                 failed       infra
========================================================  ===========  =======  =======================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harnessrl.types import FailureKind, RolloutStatus

#: Pod ``status.reason`` values that mean the node or the scheduler took the pod away.
DISRUPTION_REASONS = frozenset(
    {
        "Evicted",
        "Preempting",
        "NodeLost",
        "Shutdown",
        "Terminated",
        "NodeShutdown",
        "UnexpectedAdmissionError",
    }
)


@dataclass(frozen=True, slots=True)
class JobOutcome:
    status: RolloutStatus
    failure_kind: FailureKind | None
    reason: str | None
    exit_code: int | None
    timed_out: bool = False


def condition(job: Mapping[str, Any]) -> tuple[str, str | None, str | None] | None:
    """``("Complete"|"Failed", reason, message)`` once the Job is finished, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return cond["type"], cond.get("reason"), cond.get("message")
    return None


def reports_ready(job: Mapping[str, Any]) -> bool:
    """Whether this Job status shows a running (ready) or succeeded pod.

    ``failed`` does not count: pods killed at the deadline are counted as failed, started or not.
    """
    status = job.get("status") or {}
    return any(int(status.get(k) or 0) > 0 for k in ("ready", "succeeded"))


def _container_status(pod: Mapping[str, Any], container: str | None) -> Mapping[str, Any] | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for cs in statuses:
        if container is None or cs.get("name") == container:
            return cs
    return None


def _terminated(cs: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if cs is None:
        return None
    return (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")


def _never_started(pod: Mapping[str, Any] | None, container: str | None) -> str | None:
    """Why the harness container never ran, if the pod shows that it did not (else None)."""
    if pod is None:
        return None
    cs = _container_status(pod, container)
    if cs is None:
        phase = (pod.get("status") or {}).get("phase")
        return f"pod stayed {phase}" if phase == "Pending" else None
    state = cs.get("state") or {}
    if "running" in state or _terminated(cs) is not None:
        return None
    waiting = state.get("waiting") or {}
    return waiting.get("reason") or "container never started"


def _disruption(pod: Mapping[str, Any] | None) -> str | None:
    if pod is None:
        return None
    status = pod.get("status") or {}
    if status.get("reason") in DISRUPTION_REASONS:
        return f"{status['reason']}: {status.get('message') or ''}".rstrip(": ")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return f"DisruptionTarget ({cond.get('reason') or 'unknown'})"
    return None


def classify(
    job: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    *,
    container: str | None,
    timeout_s: float,
    seen_ready: bool,
    seen_from_creation: bool,
) -> JobOutcome:
    """The outcome of a finished Job. ``seen_*`` come from the watch: whether any status showed a
    ready pod, and whether this runner watched the Job since it created it (so "never saw it ready"
    is evidence, not a gap in observation). Used only when the pod itself is gone."""
    cond = condition(job)
    if cond is None:
        raise ValueError("the Job has not finished")
    kind, reason, message = cond
    term = _terminated(_container_status(pod, container)) if pod is not None else None
    exit_code = int(term["exitCode"]) if term is not None and term.get("exitCode") is not None else None
    detail = f"{reason or 'Failed'}: {message}" if message else (reason or "Failed")

    if kind == "Complete":
        return JobOutcome(RolloutStatus.SUCCEEDED, None, None, 0 if exit_code is None else exit_code)

    disruption = _disruption(pod)
    if disruption is not None:
        return JobOutcome(
            RolloutStatus.FAILED, FailureKind.INFRA, f"the cluster stopped the pod: {disruption}", exit_code
        )
    not_started = _never_started(pod, container)
    deadline = reason == "DeadlineExceeded"
    if not_started is None and pod is None and deadline and seen_from_creation and not seen_ready:
        not_started = "no pod of the Job was ever reported ready"
    if not_started is not None:
        return JobOutcome(
            RolloutStatus.FAILED,
            FailureKind.INFRA,
            f"the harness container never started ({not_started}); Job {detail}",
            exit_code,
        )
    if deadline:
        return JobOutcome(
            RolloutStatus.TIMED_OUT,
            FailureKind.AGENT,
            f"harness ran past its timeout of {timeout_s:g}s (activeDeadlineSeconds); Kubernetes stopped it",
            exit_code,
            timed_out=True,
        )
    why = f"harness exited with code {exit_code}" if exit_code is not None else "harness failed"
    if term is not None and term.get("reason") not in (None, "Error", "Completed"):
        why += f" ({term['reason']})"  # e.g. OOMKilled: the harness's own memory use
    return JobOutcome(RolloutStatus.FAILED, FailureKind.AGENT, f"{why}; Job {detail}", exit_code)


def _init_status(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if cs.get("name") == name:
            return cs
    return None


def _stuck(pod: Mapping[str, Any]) -> str | None:
    """The first container of the pod that failed or waits for good (e.g. an image it cannot pull)."""
    status = pod.get("status") or {}
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        term = _terminated(cs)
        if term is not None and term.get("exitCode") not in (None, 0):
            why = term.get("reason") or "Error"
            return f"container {cs.get('name')} exited with code {term['exitCode']} ({why})"
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("PodInitializing", "ContainerCreating"):
            return f"container {cs.get('name')}: {waiting['reason']}"
    return None


def classify_task_pod(
    job: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    *,
    harness: str,
    harness_exit: int | None,
    harness_timed_out: bool,
    timeout_s: float,
) -> JobOutcome:
    """The outcome of a finished Job whose pod ran the task's image (``k8s_task_pod``).

    ``harness_exit`` is the harness's status as the verifier read it after the harness's container
    ended (None: no status, the harness never got to its end in this pod). The harness's own timeout
    is enforced in its container, so a pod deadline that strikes before that is the cluster's time
    (image pulls, seeding), not the agent's: infra.
    """
    cond = condition(job)
    if cond is None:
        raise ValueError("the Job has not finished")
    _, reason, message = cond
    detail = f"{reason or 'Failed'}: {message}" if message else (reason or "Failed")
    disruption = _disruption(pod)
    if disruption is not None:
        return JobOutcome(RolloutStatus.FAILED, FailureKind.INFRA, f"the cluster stopped the pod: {disruption}", None)
    if harness_exit is not None:
        if harness_timed_out:
            return JobOutcome(
                RolloutStatus.TIMED_OUT,
                FailureKind.AGENT,
                f"harness ran past its timeout of {timeout_s:g}s and was stopped in its container",
                harness_exit,
                timed_out=True,
            )
        if harness_exit == 0:
            return JobOutcome(RolloutStatus.SUCCEEDED, None, None, 0)
        return JobOutcome(RolloutStatus.FAILED, FailureKind.AGENT, f"harness exited with code {harness_exit}",
                          harness_exit)
    if pod is None:
        return JobOutcome(RolloutStatus.FAILED, FailureKind.INFRA,
                          f"no pod left to read the verifier's report from; Job {detail}", None)
    term = _terminated(_init_status(pod, harness))
    if term is not None and term.get("exitCode") not in (None, 0):
        # Our shell exits 0 whatever the harness did: it was killed itself (e.g. OOMKilled, the harness's
        # memory counts against its container), so no status and no verifier.
        return JobOutcome(
            RolloutStatus.FAILED,
            FailureKind.AGENT,
            f"the harness container ended with code {term['exitCode']} ({term.get('reason') or 'Error'}) "
            "before the harness's status was written; the tests did not run",
            int(term["exitCode"]),
        )
    stuck = _stuck(pod)
    if reason == "DeadlineExceeded":
        return JobOutcome(
            RolloutStatus.FAILED,
            FailureKind.INFRA,
            "the pod's deadline passed before the harness reached its own timeout (image pulls and seeding "
            f"the workspace count against it: raise [runner.kubernetes] verify_grace_s){'; ' + stuck if stuck else ''}",
            None,
        )
    why = stuck or "the verifier reported no harness status"
    return JobOutcome(RolloutStatus.FAILED, FailureKind.INFRA, f"the task's pod failed: {why}; Job {detail}", None)
