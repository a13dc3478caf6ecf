"""``AppKeyAuth`` over a real store (both drivers): what each kind of key gets, and how soon a
revocation bites -- at once through this gateway, within the cache's time through another."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from harnessrl.gateway.errors import Forbidden, Unauthorized
from harnessrl.gateway.rollout_registry import hash_key
from harnessrl.production.keys import KEY_PREFIX, AppKeyAuth, OtherDeployment, new_app_key
from harnessrl.store import Store


def _key(store: Store, deployment: str) -> tuple[str, str]:
    key = new_app_key()
    return key, store.add_app_key(deployment, hash_key(key), "test").id


def test_each_kind_of_key_gets_its_answer(store: Store) -> None:
    store.create_deployment("support", {})
    store.create_deployment("billing", {})
    key, key_id = _key(store, "support")
    auth = AppKeyAuth(store)
    assert key.startswith(KEY_PREFIX) and len(key) > 40
    assert asyncio.run(auth.authorize("support", key)).id == key_id
    with pytest.raises(Unauthorized, match="missing"):
        asyncio.run(auth.authorize("support", None))
    with pytest.raises(Unauthorized, match="unknown"):
        asyncio.run(auth.authorize("support", new_app_key()))
    with pytest.raises(OtherDeployment, match="'support' only"):
        asyncio.run(auth.authorize("billing", key))


def test_a_revocation_bites_at_once_here_and_within_the_ttl_elsewhere(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the cache's clock is the test's: on a loaded machine 0.3 s of wall time passed between caching and
    # the "still cached" check, and the check failed (CI, 2026-12-01)
    clock = [1000.0]
    monkeypatch.setattr("harnessrl.production.keys.time", SimpleNamespace(monotonic=lambda: clock[0]))
    store.create_deployment("support", {})
    key, key_id = _key(store, "support")
    here, elsewhere = AppKeyAuth(store, ttl_s=0.3), AppKeyAuth(store, ttl_s=0.3)
    for auth in (here, elsewhere):
        asyncio.run(auth.authorize("support", key))  # cached
    store.revoke_app_key("support", key_id)
    here.forget(key_id)  # what the admin API of the revoking gateway does
    with pytest.raises(Forbidden, match="revoked"):
        asyncio.run(here.authorize("support", key))
    clock[0] += 0.29
    asyncio.run(elsewhere.authorize("support", key))  # another gateway: still cached
    clock[0] += 0.02
    with pytest.raises(Forbidden, match="revoked"):
        asyncio.run(elsewhere.authorize("support", key))
