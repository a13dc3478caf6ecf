"""A Kubernetes API on loopback (kmock's in-memory emulator) that the official client talks to.

Pods never run there: a test plays the Job controller and the kubelet by writing Job status and pod
objects through the same HTTP API, so the runner's watch sees them as it would on a cluster. Faults
(422, 500, 410...) are injected per request by method and path.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import aiohttp.web
import attrs
import kmock

from harnessrl.runners import RunnerConfig, make_attempt_spec
from harnessrl.runners.config import KubernetesConfig

NS = "ns1"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"
GW = "http://gateway.harnessrl.svc:8000"


@dataclass
class Fault:
    """Answer ``times`` requests matching ``method`` and ``path`` (regex) with ``status``.

    ``after``: let the request change the state first (a create that succeeded but whose answer was
    lost on the way back). ``watch``: match only watch requests (True) or only others (False).
    ``event``: answer 200 with one watch ``ERROR`` event carrying the status, as the API server does
    when a watch's resourceVersion has expired. ``delay_s``: wait that long before answering; with
    ``status`` None the request takes effect at once and its normal answer comes late.
    """

    method: str
    path: str
    status: int | None
    times: int = 1
    after: bool = False
    watch: bool | None = None
    event: bool = False
    message: str | None = None
    delay_s: float = 0.0
    hits: int = field(default=0)

    def matches(self, request: Any) -> bool:
        is_watch = request.params.get("watch") in ("true", "1", "True")
        return (
            self.hits < self.times
            and request.method.value.upper() == self.method.upper()
            and re.fullmatch(self.path, request.url.path) is not None
            and (self.watch is None or self.watch == is_watch)
        )


@attrs.define(kw_only=True)
class FaultyCluster(kmock.KubernetesEmulator):
    faults: list[Fault] = attrs.field(factory=list)
    arrivals: list[tuple[float, str, str]] = attrs.field(factory=list)  # (monotonic, method, path)

    async def _handle(self, request: Any) -> Any:
        self.arrivals.append((time.monotonic(), request.method.value.upper(), request.url.path))
        fault = next((f for f in self.faults if f.matches(request)), None)
        if fault is None:
            return await super()._handle(request)
        fault.hits += 1
        if fault.status is None:
            answer = await super()._handle(request)
            await asyncio.sleep(fault.delay_s)
            return answer
        await asyncio.sleep(fault.delay_s)
        if fault.after:
            await super()._handle(request)
        if fault.event:
            status = {"kind": "Status", "code": fault.status, "reason": "Expired", "message": "too old"}
            line = json.dumps({"type": "ERROR", "object": status}) + "\n"
            return aiohttp.web.Response(text=line, content_type="application/json")
        raise kmock.KubernetesError(
            status=fault.status, reason="Injected", message=fault.message or f"injected {fault.status}"
        )


class Cluster:
    """Test handle: the API URL, the requests seen, and the hands of the Job controller and kubelet."""

    def __init__(self, km: FaultyCluster, url: str, http: aiohttp.ClientSession) -> None:
        self.km, self.url, self.http = km, url, http

    def requests(self, method: str, path_regex: str) -> list[Any]:
        return [
            r
            for r in self.km._requests
            if r.method.value.upper() == method.upper() and re.fullmatch(path_regex, r.url.path)
        ]

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.http.get(self.url + path) as resp:
            return resp.status, await resp.json()

    async def job(self, name: str) -> dict[str, Any] | None:
        status, body = await self.get(f"{JOBS}/{name}")
        return body if status == 200 else None

    async def wait_job(self, name: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            job = await self.job(name)
            if job is not None:
                return job
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"Job {name} was never created")
            await asyncio.sleep(0.02)

    async def create(self, path: str, obj: dict[str, Any]) -> None:
        async with self.http.post(self.url + path, json=obj) as resp:
            assert resp.status in (200, 201), await resp.text()

    async def set_job_status(self, name: str, status: dict[str, Any]) -> None:
        """What the Job controller does (a merge patch of the status subresource)."""
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.http.patch(
            f"{self.url}{JOBS}/{name}/status", json={"status": status}, headers=headers
        ) as r:
            assert r.status == 200, await r.text()

    async def finish(
        self, name: str, kind: str = "Complete", reason: str | None = None, **counts: int
    ) -> None:
        cond = {"type": kind, "status": "True", **({"reason": reason} if reason else {})}
        await self.set_job_status(name, {"conditions": [cond], **counts})

    async def add_pod(
        self,
        job: str,
        *,
        exit_code: int | None = None,
        waiting: str | None = None,
        log: bytes | None = None,
        **status: Any,
    ) -> str:
        """A pod of the Job as the kubelet leaves it; ``log`` is what its log endpoint serves."""
        pod = f"{job}-abcde"
        state: dict[str, Any] = {}
        if exit_code is not None:
            state = {
                "terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
            }
        elif waiting is not None:
            state = {"waiting": {"reason": waiting}}
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod,
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": job, "job-name": job},
                "creationTimestamp": "2026-11-29T12:00:00Z",
            },
            "status": {"containerStatuses": [{"name": "harness", "state": state}], **status},
        }
        await self.create(PODS, obj)
        if log is not None:
            self.km[f"get {PODS}/{pod}/log"] << log
        return pod


TEMPLATE = """
apiVersion: batch/v1
kind: Job
metadata:
  labels: {team: rl}
spec:
  backoffLimit: 6
  template:
    spec:
      serviceAccountName: harness
      containers:
        - name: harness
          image: registry.example/harness:1
          args: ["--ignored"]
          env: [{name: FROM_TEMPLATE, value: "1"}, {name: OPENAI_API_KEY, value: overridden}]
          resources: {limits: {cpu: "1", memory: 1Gi}}
          volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, emptyDir: {}}]
"""


def k8s_config(url: str, **over: Any) -> RunnerConfig:
    runner = {k: over.pop(k) for k in ("concurrency", "timeout_s", "command") if k in over}
    settings: dict[str, Any] = {
        "api_server": url,
        "namespace": NS,
        "job_template": TEMPLATE,
        "api_retry_backoff_s": 0.01,
        "api_timeout_s": 5,
        **over,
    }
    k8s = KubernetesConfig(**settings)
    return RunnerConfig(kind="kubernetes", command=["python", "/app/agent.py"], kubernetes=k8s, **runner)


def spec(config: RunnerConfig, rid: str = "r1", **kw: Any) -> Any:
    return make_attempt_spec(
        config,
        rollout_id=rid,
        task_id=kw.pop("task_id", "t1"),
        task_input=kw.pop("task_input", {"question": "2+2?"}),
        gateway_url=GW,
        api_key=f"key-{rid}-secret",
        **kw,
    )
