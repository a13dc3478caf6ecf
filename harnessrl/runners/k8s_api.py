"""The official ``kubernetes`` client, wrapped for an asyncio runner: credentials, bounded retries,
errors a user can act on, and a token bucket for Job creation.

The synchronous client is used (the long-established one) on a small private thread pool, so that slow
API calls never occupy the event loop or the default executor that other parts use. Responses are read
raw (``_preload_content=False``) as JSON dicts: the runner reads a handful of fields and the template is
the user's YAML, so model classes would only add a lossy round trip.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harnessrl.runners.config import KubernetesConfig

logger = logging.getLogger(__name__)

#: Statuses worth retrying: throttled, or the API server (or a proxy) failing.
RETRYABLE = frozenset({429, 500, 502, 503, 504})


class KubernetesApiError(Exception):
    """A Kubernetes API call that failed for good; ``status`` is the HTTP code (0: no answer)."""

    def __init__(self, status: int, message: str, *, attempts: int = 1) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(message)


def import_client() -> Any:
    try:
        import kubernetes
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            'runner kind "kubernetes" needs the official client: pip install "harnessrl[kubernetes]"'
        ) from exc
    return kubernetes


def make_api_client(cfg: KubernetesConfig) -> Any:
    """An ``ApiClient`` from ``api_server``, the in-cluster service account, or the kubeconfig."""
    k8s = import_client()
    conf = k8s.client.Configuration()
    if cfg.api_server:
        conf.host = cfg.api_server.rstrip("/")
    else:
        in_cluster = cfg.auth == "in_cluster" or (
            cfg.auth == "auto" and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        )
        try:
            if in_cluster:
                k8s.config.load_incluster_config(client_configuration=conf)
            else:
                k8s.config.load_kube_config(
                    config_file=cfg.kubeconfig, context=cfg.context, client_configuration=conf
                )
        except (k8s.config.ConfigException, OSError) as exc:
            where = "in-cluster service account" if in_cluster else "kubeconfig"
            raise KubernetesApiError(
                0,
                f"cannot load Kubernetes credentials from the {where}: {exc}. Set [runner.kubernetes] "
                "kubeconfig/context, auth, or api_server (e.g. `kubectl proxy`).",
            ) from exc
    conf.retries = False  # our own bounded retries below; urllib3's would multiply them
    return k8s.client.ApiClient(conf)


def _status_message(exc: Any) -> str:
    """The ``message`` of a Kubernetes ``Status`` body, or the HTTP reason."""
    try:
        body = json.loads(exc.body)
        return str(body.get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "reason", exc))


class Api:
    """Raw-JSON calls with retries on 429/5xx and connection errors; anything else raises at once."""

    def __init__(self, api_client: Any, cfg: KubernetesConfig, max_workers: int = 4) -> None:
        k8s = import_client()
        self.client = api_client
        self.batch = k8s.client.BatchV1Api(api_client)
        self.core = k8s.client.CoreV1Api(api_client)
        self.networking = k8s.client.NetworkingV1Api(api_client)
        self.cfg = cfg
        self._api_exception = k8s.client.ApiException
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="harnessrl-k8s")

    async def call(
        self, what: str, fn: Callable[..., Any], *args: Any, raw: bool = False, **kwargs: Any
    ) -> Any:
        """Run ``fn`` on the pool; JSON dict (or bytes with ``raw``). ``what`` names it in errors."""
        import urllib3

        loop = asyncio.get_running_loop()
        delay = self.cfg.api_retry_backoff_s
        attempts = self.cfg.api_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return await loop.run_in_executor(self._pool, self._call_sync, fn, args, kwargs, raw)
            except self._api_exception as exc:
                status, message = int(exc.status or 0), _status_message(exc)
                if status not in RETRYABLE:
                    raise KubernetesApiError(status, f"{what}: {status} {message}", attempts=attempt) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                status, message = 0, f"no answer ({type(exc).__name__}: {exc})"
            if attempt == attempts:
                raise KubernetesApiError(
                    status,
                    f"{what}: Kubernetes API unavailable after {attempts} attempts, last: {status or ''} "
                    f"{message}".replace("  ", " "),
                    attempts=attempt,
                )
            logger.warning(
                "%s failed (%s %s); retry %d/%d in %.1fs", what, status, message, attempt, attempts - 1, delay
            )
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _call_sync(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], raw: bool
    ) -> Any:
        resp = fn(*args, **kwargs, _preload_content=False, _request_timeout=self.cfg.api_timeout_s)
        data = resp.data
        if raw:
            return data
        return json.loads(data) if data else {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.client.close()
        except Exception:  # pragma: no cover - best effort at shutdown
            logger.debug("closing the Kubernetes client failed", exc_info=True)


class TokenBucket:
    """At most ``burst`` at once, then ``rate`` per second: the configured cap on Job creation."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:  # first come, first served
            while True:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.rate)
