"""The durable record: ``open_store("sqlite:///path")`` or ``open_store("postgresql://...")``."""

from harnessrl.store.base import (
    IllegalTransition,
    NewCall,
    NotFound,
    RolloutClosed,
    Store,
    StoreError,
)

__all__ = ["IllegalTransition", "NewCall", "NotFound", "RolloutClosed", "Store", "StoreError", "open_store"]


def open_store(url: str) -> Store:
    """Open the store named by a URL (``sqlite:///path/to.db``, ``sqlite:///:memory:``, ``postgresql://``)."""
    if url.startswith("sqlite://"):
        from harnessrl.store.sqlite import SqliteStore

        # SQLAlchemy convention: sqlite:///relative.db, sqlite:////absolute.db, sqlite:///:memory:
        return SqliteStore(url.removeprefix("sqlite://").removeprefix("/") or ":memory:")
    if url.startswith(("postgresql://", "postgres://")):
        from harnessrl.store.postgres import PostgresStore  # type: ignore[import-not-found]

        return PostgresStore(url)
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///path/to.db or postgresql://user@host/db")
