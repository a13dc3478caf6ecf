"""Fixtures: a store filled through the real store API (see ``fixture_data``) and the dashboard over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harnessrl.store import Store, open_store
from harnessrl.ui import dashboard_app

from .fixture_data import Fixture, build


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ui.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def fx(store: Store, tmp_path: Path) -> Fixture:
    return build(store, tmp_path)


@pytest.fixture
def client(store: Store, fx: Fixture, store_url: str) -> Iterator[TestClient]:
    """The dashboard with token IDs shown (no tokenizer load); one test decodes with the tiny model."""
    with TestClient(dashboard_app(store, store_url=store_url, tokenizer="none")) as c:
        yield c
