"""The Kubernetes runner: one ``batch/v1`` Job per attempt, watched, re-attached after a restart.

Flow of ``run``: wait for a concurrency slot and a creation token, create the attempt's Secret (the
API key) and Job under a name derived from the rollout id, then wait on the run's single Job watch
until the Job finishes; read the pod's exit code and log tail; classify (``k8s_status``).

Restart: names are deterministic, so ``run`` for a rollout whose Job already exists (found in the
watch's first list, or by a 409 on create) attaches to that Job instead of creating a second one, and
the spec's env is not applied again (the Job has its own). A controller resuming a run calls
``existing()`` to see which rollouts still have Jobs, and ``run(spec)`` for each to collect them.
``detach()`` stops watching and leaves Jobs running (graceful controller restart); ``aclose()`` deletes
them. API failures (invalid template, conflicts with foreign objects, API down after retries) become
``failed``/``infra`` results with the API's own message, never exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from typing import Any

from harnessrl.runners.base import OnStart, Runner, RunnerError
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.k8s_api import Api, KubernetesApiError, TokenBucket, make_api_client
from harnessrl.runners.k8s_grade import VerifierReport, grade, parse_report
from harnessrl.runners.k8s_manifest import (
    NONCE_ANNOTATION,
    ROLLOUT_ANNOTATION,
    JobTemplateError,
    attempt_deadline_s,
    build_objects,
    harness_container,
    identity,
    is_ours,
    job_name,
    load_template,
    network_policy,
    owner_reference,
    run_selector,
)
from harnessrl.runners.k8s_results import (
    explain,
    infra_result,
    log_tail,
    newest_pod,
    outcome_result,
    read_log,
    redact,
)
from harnessrl.runners.k8s_status import classify, classify_task_pod, condition
from harnessrl.runners.k8s_task_pod import (
    VERIFIER,
    TaskPodError,
    read_tests,
    tests_config_map,
    tests_map_name,
)
from harnessrl.runners.k8s_watch import JobWatcher
from harnessrl.runners.spec import AttemptResult, AttemptSpec
from harnessrl.types import FailureKind, RolloutStatus

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]


class KubernetesRunner(Runner):
    """Attempts as Jobs in ``config.kubernetes.namespace``, labelled with ``run_id``.

    ``api_client`` (a ``kubernetes.client.ApiClient``) overrides the configured credentials.
    """

    def __init__(self, config: RunnerConfig, *, run_id: str = "default", api_client: Any = None) -> None:
        self.config = config
        self.k8s = config.kubernetes
        self.run_id = run_id
        self.template = load_template(self.k8s)  # a bad template fails now, not at the first attempt
        self._container = harness_container(self.template, self.k8s.container).get("name")
        self._api_client = api_client
        self._warned_open_port = False
        self._api: Api | None = None
        self._watcher: JobWatcher | None = None
        self._slots = asyncio.Semaphore(config.concurrency)
        self._bucket = TokenBucket(self.k8s.creations_per_s, self.k8s.creation_burst)
        self._cancels: dict[str, asyncio.Event] = {}
        self._detached = False
        self._start_lock = asyncio.Lock()
        self._tests_maps: set[str] = set()  # Jobs whose tests ConfigMap is deleted with them

    # ---- Runner API ------------------------------------------------------------------------------

    def active(self) -> list[str]:
        return list(self._cancels)

    async def cancel(self, rollout_id: str) -> bool:
        event = self._cancels.get(rollout_id)
        if event is None:
            return False
        event.set()
        return True

    async def existing(self) -> dict[str, JsonDict]:
        """Rollout id -> Job (as the API returns it) for every Job of this run still in the cluster."""
        watcher = await self._start()
        return {
            job["metadata"]["annotations"][ROLLOUT_ANNOTATION]: job
            for job in watcher.jobs.values()
            if ROLLOUT_ANNOTATION in ((job.get("metadata") or {}).get("annotations") or {})
        }

    async def run(self, spec: AttemptSpec, on_start: OnStart | None = None) -> AttemptResult:
        if spec.rollout_id in self._cancels:
            raise RunnerError(f"rollout {spec.rollout_id} is already running on this runner")
        if self._detached:
            raise RunnerError("this runner was detached; make a new one to re-attach")
        cancel = self._cancels[spec.rollout_id] = asyncio.Event()
        started = time.monotonic()
        name = job_name(spec.rollout_id)
        held = created = False
        try:
            try:
                watcher = await self._start()
                job = watcher.jobs.get(name)
                if job is None:  # a new attempt: a slot (held until the end), a token, then create
                    held = await _wait_or_cancel(self._slots.acquire(), cancel, undo=self._slots.release)
                    if held:
                        await _wait_or_cancel(self._bucket.acquire(), cancel)
                    if cancel.is_set():
                        return infra_result(
                            spec, RolloutStatus.CANCELLED, FailureKind.INFRA, "cancelled before start"
                        )
                    job, created = await self._launch(spec, name)
                if not is_ours(job, self.run_id, spec.rollout_id):
                    reason = (
                        f"a Job named {name} already exists in namespace {self.k8s.namespace} and belongs "
                        "to another run or rollout; delete it or use another run id"
                    )
                    return infra_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, reason, started)
            except KubernetesApiError as exc:
                reason = redact(explain(exc, self.k8s.namespace), spec, self.k8s.secret_env)
                return infra_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, reason, started)
            except (JobTemplateError, TaskPodError) as exc:  # this attempt's pod cannot be built: say why
                return infra_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, str(exc), started)
            task_env = spec.assets.environment
            if task_env is not None and task_env.tests is not None:
                self._tests_maps.add(name)  # also when re-attached: deleted with the Job
            handle = f"k8s:{self.k8s.namespace}/{name}"
            if not created:  # re-attached Jobs run beyond the concurrency cap rather than wait
                logger.info("rollout %s: attached to existing Job %s", spec.rollout_id, name)
            if on_start is not None:
                on_start(handle)
            if self._detached:  # detached while the Job was being created: it runs on, unwatched
                raise RunnerError(detached_reason(spec, name))
            return await self._follow(spec, name, handle, cancel, started, created, watcher)
        except asyncio.CancelledError:
            if not self._detached:  # the awaiting task was cancelled: the attempt goes too
                await asyncio.shield(self._delete(name))
            raise
        finally:
            if held:
                self._slots.release()
            del self._cancels[spec.rollout_id]

    async def release(self, result: AttemptResult) -> None:
        """Delete the attempt's Secret, and its Job unless ``keep_jobs`` keeps it for the TTL."""
        if self._api is None or result.handle is None:
            return
        name = job_name(result.rollout_id)
        keep = self.k8s.keep_jobs
        if keep == "all" or (keep == "failed" and result.status != RolloutStatus.SUCCEEDED):
            await self._delete_secret(name)
            await self._delete_tests(name)
        else:
            await self._delete(name)

    async def detach(self) -> None:
        """Stop watching and leave every Job running, for a controller that will re-attach later."""
        self._detached = True
        for event in self._cancels.values():
            event.set()
        await asyncio.sleep(0)
        self._shutdown()

    async def aclose(self) -> None:
        """Cancel (delete) every active attempt, then stop watching."""
        await super().aclose()
        while self._cancels:
            await asyncio.sleep(0.01)
        self._shutdown()

    # ---- internals -------------------------------------------------------------------------------

    async def _start(self) -> JobWatcher:
        async with self._start_lock:  # attempts launched together must share one client and one watch
            if self._api is None:
                client = self._api_client or await asyncio.to_thread(make_api_client, self.k8s)
                self._api = Api(client, self.k8s, max_workers=min(8, self.config.concurrency + 2))
                self._watcher = JobWatcher(self._api, self.k8s.namespace, run_selector(self.run_id))
            assert self._watcher is not None
            watcher = self._watcher
        await watcher.start()
        return watcher

    async def _launch(self, spec: AttemptSpec, name: str) -> tuple[JsonDict, bool]:
        """Create the Secret, then the Job: (job, created). A 409 on the Job gives the existing one."""
        assert self._api is not None
        task_env = spec.assets.environment
        tests = None
        if task_env is not None and task_env.tests is not None:
            tests = await asyncio.to_thread(read_tests, task_env.tests.tests_dir, task_env.name)
        nonce = secrets.token_hex(12)
        job, secret = build_objects(self.config, self.template, spec, self.run_id, tests=tests, nonce=nonce)
        policy = network_policy(self.config, spec, self.run_id)
        ns = self.k8s.namespace
        if policy is not None and "to" not in policy["spec"]["egress"][0] and not self._warned_open_port:
            self._warned_open_port = True
            logger.warning("the gateway URL names a host, not an IP: rollout pods may reach port %s of any "
                           "address; set [runner.kubernetes] gateway_peers to the gateway's pods",
                           policy["spec"]["egress"][0]["ports"][0]["port"])
        if policy is not None:  # before the Job: its pod never runs unrestricted
            await self._create_policy(spec, name, policy)
        if secret is not None:
            try:
                await self._api.call(
                    f"create Secret {name}", self._api.core.create_namespaced_secret, ns, secret
                )
            except KubernetesApiError as exc:
                if exc.status != 409:
                    raise
                found = await self._api.call(
                    f"read Secret {name}", self._api.core.read_namespaced_secret, name, ns
                )
                if not is_ours(found, self.run_id, spec.rollout_id):
                    raise KubernetesApiError(
                        409, f"a Secret named {name} exists and belongs to another run or rollout"
                    ) from exc
                # Left by a create that crashed half-way: give it this spec's key (a pod already
                # running read its key at start and is not affected).
                patch = {"stringData": secret["stringData"]}
                await self._api.call(
                    f"update Secret {name}", self._api.core.patch_namespaced_secret, name, ns, patch
                )
        if tests is not None:
            labels, annotations = identity(self.config, spec, self.run_id)
            meta = {"namespace": ns, "labels": labels, "annotations": annotations}
            self._tests_maps.add(name)
            try:
                await self._create_tests(spec, name, tests_config_map(name, meta, tests))
            except KubernetesApiError:
                await self._delete_secret(name)
                await self._delete_policy(name)
                raise
        try:
            made = await self._api.call(f"create Job {name}", self._api.batch.create_namespaced_job, ns, job)
        except KubernetesApiError as exc:
            if exc.status != 409:  # keep the key from outliving an attempt that never ran
                await self._delete_secret(name)
                await self._delete_policy(name)
                await self._delete_tests(name)
                raise
            found = await self._api.call(f"read Job {name}", self._api.batch.read_namespaced_job, name, ns)
            if not is_ours(found, self.run_id, spec.rollout_id):
                await self._delete_secret(name)  # ours (created or checked above), the Job is not
                await self._delete_policy(name)
                await self._delete_tests(name)
                raise KubernetesApiError(
                    409, f"a Job named {name} exists and belongs to another run or rollout"
                ) from exc
            return found, False  # an earlier create whose answer we never got: adopt it
        owner = owner_reference(made)
        if owner is not None:  # garbage-collected with the Job (its TTL) if harnessrl never gets to it
            owned = {"metadata": {"ownerReferences": [owner]}}
            if secret is not None:
                with contextlib.suppress(KubernetesApiError):  # without it the Secret is deleted at release
                    await self._api.call(f"own Secret {name}", self._api.core.patch_namespaced_secret,
                                         name, ns, owned)
            if policy is not None:
                with contextlib.suppress(KubernetesApiError):
                    await self._api.call(f"own NetworkPolicy {name}",
                                         self._api.networking.patch_namespaced_network_policy, name, ns, owned)
            if tests is not None:
                with contextlib.suppress(KubernetesApiError):
                    await self._api.call(f"own ConfigMap {tests_map_name(name)}",
                                         self._api.core.patch_namespaced_config_map, tests_map_name(name), ns, owned)
        logger.info("rollout %s: created Job %s/%s", spec.rollout_id, ns, name)
        return made, True

    async def _follow(
        self,
        spec: AttemptSpec,
        name: str,
        handle: str,
        cancel: asyncio.Event,
        started: float,
        created: bool,
        watcher: JobWatcher,
    ) -> AttemptResult:
        """Wait for the Job's end (or a cancel), then read its pod and classify.

        ``watcher`` is the one this attempt started with: ``detach`` may drop the runner's own
        reference at any await."""
        terminal = watcher.wait(name)
        waiter = asyncio.ensure_future(cancel.wait())
        limit = attempt_deadline_s(self.config, spec) + self.k8s.deadline_grace_s
        either: set[asyncio.Future[Any]] = {terminal, waiter}
        try:
            await asyncio.wait(either, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self._detached:
            raise RunnerError(detached_reason(spec, name))
        if cancel.is_set() and not terminal.done():
            terminal.cancel()
            await self._delete(name)
            return infra_result(
                spec,
                RolloutStatus.CANCELLED,
                FailureKind.INFRA,
                "cancelled by the controller",
                started,
                handle,
            )
        job = terminal.result() if terminal.done() else await self._overdue(name, terminal)
        if job is None:
            return infra_result(
                spec,
                RolloutStatus.FAILED,
                FailureKind.INFRA,
                f"Job {name} was deleted before it finished (not by harnessrl)",
                started,
                handle,
            )
        if isinstance(job, str):
            return infra_result(spec, RolloutStatus.FAILED, FailureKind.INFRA, job, started, handle)
        return await self._finish(spec, name, handle, job, started, created, watcher)

    async def _overdue(self, name: str, terminal: asyncio.Future[JsonDict | None]) -> JsonDict | str | None:
        """No terminal status after the deadline plus grace: read the Job once; if still running, stop it."""
        terminal.cancel()
        assert self._api is not None
        try:
            job: JsonDict = await self._api.call(
                f"read Job {name}", self._api.batch.read_namespaced_job, name, self.k8s.namespace
            )
        except KubernetesApiError as exc:
            if exc.status == 404:
                return None
            job = {}
        if condition(job) is not None:
            return job
        await self._delete(name)
        return (
            f"Job {name} reported no end {self.k8s.deadline_grace_s:g}s after its deadline "
            "(watch or Job controller not working); deleted"
        )

    async def _finish(
        self,
        spec: AttemptSpec,
        name: str,
        handle: str,
        job: JsonDict,
        started: float,
        created: bool,
        watcher: JobWatcher,
    ) -> AttemptResult:
        if self._api is None:  # detached after the Job ended, before its pod was read
            raise RunnerError(detached_reason(spec, name))
        pod = await newest_pod(self._api, self.k8s.namespace, name)
        if spec.assets.environment is not None:
            return await self._finish_task_pod(spec, name, handle, job, pod, started)
        outcome = classify(
            job,
            pod,
            container=self._container,
            timeout_s=spec.timeout_s,
            seen_ready=name in watcher.ready_seen,
            seen_from_creation=created,
        )
        tail = await log_tail(
            self._api,
            self.k8s.namespace,
            pod,
            self._container,
            self.k8s.log_tail_lines,
            self.config.max_log_bytes,
        )
        logger.info("rollout %s: %s (%s)", spec.rollout_id, outcome.status, outcome.reason or "exit 0")
        return outcome_result(spec, outcome, handle, started, tail)

    async def _finish_task_pod(
        self, spec: AttemptSpec, name: str, handle: str, job: JsonDict, pod: JsonDict | None, started: float
    ) -> AttemptResult:
        """A task pod's end: the harness's status and the grade from the verifier's log, its output from
        the harness's (init) container."""
        assert self._api is not None and spec.assets.environment is not None
        ns, tests = self.k8s.namespace, spec.assets.environment.tests
        nonce = ((job.get("metadata") or {}).get("annotations") or {}).get(NONCE_ANNOTATION, "")
        report, why = VerifierReport(), "no pod left to read the verifier's log from"
        if pod is not None:
            data, why = await read_log(self._api, ns, pod, VERIFIER, self.k8s.log_tail_lines)
            if data is not None:
                report = parse_report(data.decode("utf-8", errors="replace"), nonce)
                why = f"the pod ended first (Job {(condition(job) or ('', None, None))[1] or 'ended'})"
        outcome = classify_task_pod(job, pod, harness=self._container or "harness",
                                    harness_exit=report.harness_exit, harness_timed_out=report.harness_timed_out,
                                    timeout_s=spec.timeout_s)
        graded = None
        if tests is not None and report.harness_exit is not None and outcome.failure_kind is not FailureKind.INFRA:
            graded = grade(report, tests_timeout_s=tests.timeout_s, why_unfinished=why,
                           max_bytes=self.config.max_log_bytes)
        tail = await log_tail(self._api, ns, pod, self._container, self.k8s.log_tail_lines, self.config.max_log_bytes)
        logger.info("rollout %s: %s (%s), grade %s", spec.rollout_id, outcome.status, outcome.reason or "exit 0",
                    None if graded is None else graded.value)
        return dataclasses.replace(outcome_result(spec, outcome, handle, started, tail), graded=graded)

    async def _create_tests(self, spec: AttemptSpec, name: str, body: JsonDict) -> None:
        """Create the attempt's tests ConfigMap; one of ours left by an earlier try gets this body."""
        assert self._api is not None
        ns, map_name = self.k8s.namespace, body["metadata"]["name"]
        try:
            await self._api.call(f"create ConfigMap {map_name}", self._api.core.create_namespaced_config_map, ns, body)
        except KubernetesApiError as exc:
            if exc.status != 409:
                raise
            found = await self._api.call(f"read ConfigMap {map_name}", self._api.core.read_namespaced_config_map,
                                         map_name, ns)
            if not is_ours(found, self.run_id, spec.rollout_id):
                raise KubernetesApiError(
                    409, f"a ConfigMap named {map_name} exists and belongs to another run or rollout"
                ) from exc
            await self._api.call(f"replace ConfigMap {map_name}", self._api.core.replace_namespaced_config_map,
                                 map_name, ns, body)

    async def _delete_tests(self, name: str) -> None:
        if self._api is None or name not in self._tests_maps:
            return
        self._tests_maps.discard(name)
        map_name = tests_map_name(name)
        try:
            await self._api.call(f"delete ConfigMap {map_name}", self._api.core.delete_namespaced_config_map,
                                 map_name, self.k8s.namespace)
        except KubernetesApiError as exc:
            if exc.status != 404:
                logger.warning("could not delete ConfigMap %s: %s", map_name, exc)

    async def _delete(self, name: str) -> None:
        if self._api is None:
            return
        try:
            await self._api.call(
                f"delete Job {name}",
                self._api.batch.delete_namespaced_job,
                name,
                self.k8s.namespace,
                propagation_policy="Background",
            )
        except KubernetesApiError as exc:
            if exc.status != 404:
                logger.warning("could not delete Job %s: %s", name, exc)
        await self._delete_secret(name)
        await self._delete_policy(name)
        await self._delete_tests(name)

    async def _create_policy(self, spec: AttemptSpec, name: str, policy: JsonDict) -> None:
        """Create the attempt's NetworkPolicy; one of ours left by an earlier try is kept (same rules)."""
        assert self._api is not None
        ns = self.k8s.namespace
        try:
            await self._api.call(f"create NetworkPolicy {name}",
                                 self._api.networking.create_namespaced_network_policy, ns, policy)
        except KubernetesApiError as exc:
            if exc.status != 409:
                raise
            found = await self._api.call(f"read NetworkPolicy {name}",
                                         self._api.networking.read_namespaced_network_policy, name, ns)
            if not is_ours(found, self.run_id, spec.rollout_id):
                raise KubernetesApiError(
                    409, f"a NetworkPolicy named {name} exists and belongs to another run or rollout"
                ) from exc

    async def _delete_policy(self, name: str) -> None:
        if self._api is None or not self.k8s.network_policy:
            return
        try:
            await self._api.call(f"delete NetworkPolicy {name}",
                                 self._api.networking.delete_namespaced_network_policy, name, self.k8s.namespace)
        except KubernetesApiError as exc:
            if exc.status != 404:
                logger.warning("could not delete NetworkPolicy %s: %s", name, exc)

    async def _delete_secret(self, name: str) -> None:
        if self._api is None or not self.k8s.api_key_secret:
            return
        try:
            await self._api.call(
                f"delete Secret {name}", self._api.core.delete_namespaced_secret, name, self.k8s.namespace
            )
        except KubernetesApiError as exc:
            if exc.status != 404:
                logger.warning("could not delete Secret %s: %s", name, exc)

    def _shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._api is not None:
            self._api.close()
        self._api, self._watcher = None, None


def detached_reason(spec: AttemptSpec, name: str) -> str:
    return f"runner detached while rollout {spec.rollout_id} runs; Job {name} continues"


async def _wait_or_cancel(awaitable: Any, cancel: asyncio.Event, undo: Any = None) -> bool:
    """Await ``awaitable`` unless ``cancel`` fires first. True if it completed; when it completed but
    we are cancelled anyway (or our own task is), ``undo`` gives back what it acquired."""
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        cancel.set()
        raise
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        done = task.done() and not task.cancelled() and task.exception() is None
        if done and cancel.is_set() and undo is not None:
            undo()
            done = False
    return done
