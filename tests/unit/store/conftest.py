"""The store suite runs against every driver: add a driver by adding its name to ``DRIVERS``.

Tests receive ``store`` (a fresh, empty store) and, when they reopen it, ``store_url`` (where it lives).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harnessrl.store import Store, open_store

DRIVERS = ["sqlite"]


@pytest.fixture(params=DRIVERS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"  # tmp_path is absolute: sqlite:////tmp/...
    raise NotImplementedError(request.param)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def new_rollout(store: Store) -> Callable[..., str]:
    """Create a queued rollout (optionally with more fields) and return its id."""

    def make(**kwargs: object) -> str:
        fields: dict = {"task_id": "t", "input": {"q": 1}, "group_id": "g", "api_key_hash": "h"}
        return store.create_rollout(**(fields | kwargs)).id

    return make
