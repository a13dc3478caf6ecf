"""The durable record: ``open_store("sqlite:///path")`` or ``open_store("postgresql://...")``."""

from harnessrl.store.base import (
    AlreadyExists,
    BudgetExceeded,
    IllegalTransition,
    NewCall,
    NotFound,
    RolloutClosed,
    Store,
    StoreError,
)
from harnessrl.store.judge_calls import JudgeCall

__all__ = [
    "AlreadyExists",
    "BudgetExceeded",
    "IllegalTransition",
    "JudgeCall",
    "NewCall",
    "NotFound",
    "RolloutClosed",
    "Store",
    "StoreError",
    "open_store",
]


def open_store(url: str) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:`` (SQLAlchemy's
    convention; ``?synchronous=FULL`` is accepted) or ``postgresql://user@host/db``.
    """
    if url.startswith("sqlite://"):
        from harnessrl.store.sqlite import SqliteStore

        return SqliteStore.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        import importlib

        return importlib.import_module("harnessrl.store.postgres").PostgresStore(url)  # type: ignore[no-any-return]
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///path/to.db or postgresql://user@host/db")
