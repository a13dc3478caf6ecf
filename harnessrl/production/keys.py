"""App keys: how a deployed application authenticates, scoped to one deployment, revocable.

A key is shown once (``POST /admin/deployments/{d}/keys``) and stored only as its SHA-256 hash. It opens
``/p/{its deployment}/...`` and nothing else: it is neither a rollout key (those are compared with one
rollout's own hash) nor an admin or viewer token. Lookups are cached for a few seconds so that the hot
path stays off the store; a key revoked through this gateway is forgotten at once, one revoked through
another gateway sharing the store stops working within ``ttl_s``.
"""

from __future__ import annotations

import asyncio
import secrets
import time

from harnessrl.gateway.errors import Forbidden, Unauthorized
from harnessrl.gateway.rollout_registry import hash_key
from harnessrl.store.base import Store
from harnessrl.store.deployments import AppKey

#: App keys are told apart from rollout keys (``hrl-``) and admin tokens (``hrl-admin-``) at a glance.
KEY_PREFIX = "hrl-app-"
#: Cached lookups (found or not) at most.
MAX_CACHED = 10_000


class OtherDeployment(Forbidden):
    """A good key of another deployment (the caller answers 404 instead when the deployment does not exist)."""


def new_app_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class AppKeyAuth:
    """Finds the app key of a request and checks that it may use a deployment."""

    def __init__(self, store: Store, ttl_s: float = 5.0) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._cache: dict[str, tuple[float, AppKey | None]] = {}  # key hash -> (looked up at, key)

    async def authorize(self, deployment: str, key: str | None) -> AppKey:
        """The key if it opens ``deployment``: 401 missing or unknown, 403 revoked, ``OtherDeployment``
        (403) when it is another deployment's key."""
        if not key:
            raise Unauthorized("missing API key: send the deployment's app key as 'Authorization: Bearer <key>' "
                               "or 'x-api-key'")
        found = await self._find(hash_key(key))
        if found is None:
            raise Unauthorized("unknown API key: create one with POST /admin/deployments/<deployment>/keys",
                               code="invalid_api_key")
        if found.revoked_at is not None:
            raise Forbidden(f"this app key ({found.id}) was revoked; create a new one with "
                            f"POST /admin/deployments/{found.deployment}/keys", code="revoked_api_key")
        if found.deployment != deployment:
            raise OtherDeployment(f"this app key opens deployment {found.deployment!r} only, not {deployment!r}")
        return found

    def forget(self, key_id: str) -> None:
        """Drop a key from the cache (it was just revoked here)."""
        for h, (_, k) in list(self._cache.items()):
            if k is not None and k.id == key_id:
                del self._cache[h]

    async def _find(self, key_hash: str) -> AppKey | None:
        now = time.monotonic()
        hit = self._cache.get(key_hash)
        if hit is not None and now - hit[0] < self._ttl_s:
            return hit[1]
        found = await asyncio.to_thread(self._store.find_app_key, key_hash)
        if len(self._cache) >= MAX_CACHED:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key_hash] = (now, found)
        return found
