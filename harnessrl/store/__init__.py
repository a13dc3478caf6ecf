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

__all__ = [
    "AlreadyExists",
    "BudgetExceeded",
    "IllegalTransition",
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
        from harnessrl.store.assembly import FullSqliteStore

        return FullSqliteStore.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from harnessrl.store.assembly import full_postgres_store

        return full_postgres_store()(url)
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///path/to.db or postgresql://user@host/db")
