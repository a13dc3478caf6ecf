"""Test-wide settings: nothing may touch a model hub, and tests never listen beyond loopback; the shared
PostgreSQL fixture."""

import os
import uuid
from collections.abc import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# litellm fetches a price list from the internet at import unless told to use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from skip_policy import pytest_configure  # noqa: E402, F401  (tests/ is on sys.path: CI fails on unlisted skips)

POSTGRES_ENV = "HARNESSRL_TEST_POSTGRES_URL"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A store URL whose tables live in a fresh schema of the test PostgreSQL server, dropped after the test
    (skipped without a server: ``eval "$(bash scripts/postgres.sh)"``; CI starts one)."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV} (eval \"$(bash scripts/postgres.sh)\")")
    psycopg = pytest.importorskip("psycopg")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
