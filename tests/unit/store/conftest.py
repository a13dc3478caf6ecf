"""The store suite runs against every driver: add a driver by adding its name to ``DRIVERS``.

Tests receive ``store`` (a fresh, empty store) and, when they reopen it, ``store_url`` (where it lives).
PostgreSQL runs when ``HARNESSRL_TEST_POSTGRES_URL`` names a server (``eval "$(bash scripts/postgres.sh)"``
starts one) and is skipped otherwise; each test gets its own schema in that database, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harnessrl.store import Store, open_store

DRIVERS = ["sqlite", "postgresql"]
POSTGRES_ENV = "HARNESSRL_TEST_POSTGRES_URL"


@pytest.fixture(params=DRIVERS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"  # tmp_path is absolute: sqlite:////tmp/...
    elif request.param == "postgresql":
        yield from _postgres_schema_url()
    else:
        raise NotImplementedError(request.param)


def _postgres_schema_url() -> Iterator[str]:
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV} (eval \"$(bash scripts/postgres.sh)\")")
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
