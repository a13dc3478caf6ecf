"""One list+watch of the run's Jobs (label selector), kept as a cache that attempts wait on.

Why one watch and not a poll per attempt: a thousand attempts polling every few seconds is a load the
API server notices; one watch costs one long request whatever the number of Jobs. The pattern is the
informer's: list (gives a resourceVersion), watch from it, resume after each server-side timeout, and
re-list when the watch expires (410 Gone) or breaks. Objects removed between two lists are reported as
deleted. The blocking client runs in one daemon thread that hands events to the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from harnessrl.runners.k8s_api import Api, KubernetesApiError, import_client
from harnessrl.runners.k8s_manifest import selector_string
from harnessrl.runners.k8s_status import condition, reports_ready

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class JobWatcher:
    """Latest state of every Job of one run, and futures resolved when a Job finishes or vanishes."""

    def __init__(self, api: Api, namespace: str, selector: Mapping[str, str]) -> None:
        self.api = api
        self.namespace = namespace
        self.selector = dict(selector)
        self.jobs: dict[str, JsonDict] = {}
        #: Jobs whose status ever showed a ready or succeeded pod (evidence that the harness started).
        self.ready_seen: set[str] = set()
        self.lists = 0  # how many times the state was (re)listed; 1 in a healthy run
        self._waiters: dict[str, list[asyncio.Future[JsonDict | None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._watch: Any = None
        self._synced = False
        self._failures = 0
        self._last_error = ""
        self._settled: asyncio.Event | None = None

    # ---- event-loop side -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start watching (once) and wait for the first list; raise if the API keeps failing."""
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._settled = asyncio.Event()
            self._thread = threading.Thread(target=self._run, name="harnessrl-k8s-watch", daemon=True)
            self._thread.start()
        assert self._settled is not None
        while not self._synced:
            if self._failures > self.api.cfg.api_retries:
                raise KubernetesApiError(
                    0, f"cannot list Jobs in namespace {self.namespace!r}: {self._last_error}"
                )
            self._settled.clear()
            await self._settled.wait()

    def wait(self, name: str) -> asyncio.Future[JsonDict | None]:
        """A future for the Job's terminal state (its dict), or None if it is deleted before that."""
        assert self._loop is not None, "start() first"
        fut: asyncio.Future[JsonDict | None] = self._loop.create_future()
        job = self.jobs.get(name)
        if job is not None and condition(job) is not None:
            fut.set_result(job)
        else:
            self._waiters.setdefault(name, []).append(fut)
        return fut

    def stop(self) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()  # shuts the socket down, so the blocked read returns now

    def _matches(self, obj: Mapping[str, Any]) -> bool:
        # Also checked here: the selector is a request, and a proxy or test server may ignore it.
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in self.selector.items())

    def _update(self, obj: JsonDict) -> None:
        name = _name(obj)
        self.jobs[name] = obj
        if reports_ready(obj):
            self.ready_seen.add(name)
        if condition(obj) is not None:
            self._notify(name, obj)

    def _gone(self, name: str) -> None:
        # Only Jobs seen before: a list fetched just before a create must not "delete" the new Job.
        if self.jobs.pop(name, None) is not None:
            self._notify(name, None)

    def _notify(self, name: str, obj: JsonDict | None) -> None:
        for fut in self._waiters.pop(name, []):
            if not fut.done():
                fut.set_result(obj)

    def _apply_list(self, items: list[JsonDict]) -> None:
        self.lists += 1
        listed = {_name(o) for o in items if self._matches(o)}
        for obj in items:
            if self._matches(obj):
                self._update(obj)
        for name in set(self.jobs) - listed:
            self._gone(name)
        self._synced = True
        self._failures = 0
        self._set_settled()

    def _apply_event(self, kind: str, obj: JsonDict) -> None:
        if not self._matches(obj):
            return
        if kind == "DELETED":
            self._gone(_name(obj))
        else:
            self._update(obj)

    def _failed(self, message: str) -> None:
        self._failures += 1
        self._last_error = message
        self._set_settled()

    def _set_settled(self) -> None:
        if self._settled is not None:
            self._settled.set()

    # ---- watch thread ----------------------------------------------------------------------------

    def _post(self, fn: Any, *args: Any) -> bool:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
            return True
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self._stop.set()
            return False

    def _run(self) -> None:
        k8s = import_client()
        import urllib3

        cfg = self.api.cfg
        backoff = max(cfg.api_retry_backoff_s, 0.05)
        while not self._stop.is_set():
            try:
                version = self._list()
                backoff = max(cfg.api_retry_backoff_s, 0.05)
                while not self._stop.is_set():
                    version = self._watch_once(version, urllib3.exceptions.ReadTimeoutError)
            except k8s.client.ApiException as exc:
                if self._stop.is_set():
                    break
                if exc.status == 410:  # the watch's resourceVersion is too old: list again
                    logger.info("Job watch expired (410 Gone); re-listing")
                    continue
                self._retry_later(f"{exc.status} {exc.reason}", backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception as exc:  # connection errors and the like: list again after a pause
                if self._stop.is_set():
                    break
                self._retry_later(f"{type(exc).__name__}: {exc}", backoff)
                backoff = min(backoff * 2, 30.0)

    def _retry_later(self, message: str, delay: float) -> None:
        logger.warning("Job list/watch in %s failed (%s); retrying in %.1fs", self.namespace, message, delay)
        if self._post(self._failed, message):
            self._stop.wait(delay)

    def _list(self) -> str | None:
        resp = self.api.batch.list_namespaced_job(
            self.namespace,
            label_selector=selector_string(self.selector),
            _preload_content=False,
            _request_timeout=self.api.cfg.api_timeout_s,
        )
        body = json.loads(resp.data)
        self._post(self._apply_list, list(body.get("items") or []))
        return (body.get("metadata") or {}).get("resourceVersion")

    def _watch_once(self, version: str | None, read_timeout: type[Exception]) -> str | None:
        """One watch request until the server ends it; returns the last resourceVersion seen."""
        k8s = import_client()
        cfg = self.api.cfg
        self._watch = watch = k8s.watch.Watch()
        kwargs: dict[str, Any] = {
            "label_selector": selector_string(self.selector),
            "timeout_seconds": cfg.watch_timeout_s,
            "allow_watch_bookmarks": True,
            "deserialize": False,
            "_request_timeout": (cfg.api_timeout_s, cfg.watch_timeout_s + cfg.api_timeout_s),
        }
        if version:
            kwargs["resource_version"] = version
        try:
            for event in watch.stream(self.api.batch.list_namespaced_job, self.namespace, **kwargs):
                if self._stop.is_set():
                    break
                obj = event.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self._post(self._apply_event, event["type"], obj)
        except read_timeout:  # a quiet watch the server did not end in time: resume it
            pass
        finally:
            self._watch = None
        return version
