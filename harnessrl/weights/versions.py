"""The policy-version rows: which weights a version number names, written once per published version.

Every writer goes through ``record_policy_version``: the controller after each step's checkpoint (and on
resume), a ``Trainer`` given a store, and ``POST /admin/policy_version {"record": true}`` for a trainer of
one's own. Recording is idempotent, because a resumed run re-publishes the version it already recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.store.base import AlreadyExists, Store


def record_policy_version(store: Store, version: int, checkpoint_path: str | Path | None, *,
                          run_id: str | None = None, step: int | None = None,
                          metadata: dict[str, Any] | None = None) -> bool:
    """Record ``version`` (its weights at ``checkpoint_path``); False when it was recorded already.

    ``step``, when given, is kept in the row's metadata as ``{"step": step}`` (the dashboard shows it).
    """
    meta = dict(metadata or {})
    if step is not None:
        meta["step"] = step
    path = None if checkpoint_path is None else str(checkpoint_path)
    try:
        store.add_policy_version(version, path, run_id=run_id, metadata=meta)
    except AlreadyExists:
        return False
    return True
