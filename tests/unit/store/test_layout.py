"""The store is a core record that features extend: the core modules import no feature store, and the
stores ``open_store`` returns carry every feature (read from the source, lazy imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl.store
from harnessrl.store import open_store

STORE = Path(harnessrl.store.__file__).parent
#: The feature stores and the module that mixes them into the drivers.
FEATURES = {"judge_calls", "deployments", "feedback", "canary", "assembly"}
#: The core record: runs, tasks, rollouts, calls, rewards, policy versions, retention.
CORE = {"base", "sql", "sqlite", "postgres", "schema", "rows", "codec", "rules", "retention", "mixin"}


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_the_core_imports_no_feature_store() -> None:
    found = {p.stem for p in STORE.glob("*.py")} - {"__init__"}
    assert found == CORE | FEATURES, "a store module is neither core nor feature: classify it here"
    bad = sorted(f"store/{name}.py imports {m}" for name in CORE for m in _imported(STORE / f"{name}.py")
                 if any(m == f"harnessrl.store.{f}" or m.startswith(f"harnessrl.store.{f}.") for f in FEATURES))
    assert not bad, "\n".join(bad)


def test_an_opened_store_has_every_feature(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        for method in ("add_judge_calls", "create_deployment", "add_feedback", "add_canary_decision"):
            assert callable(getattr(store, method, None)), method
        assert store.list_deployments() == []  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_database_the_bare_driver_made_gets_the_feature_tables(store_url: str) -> None:
    """A database first opened by a driver without the features (core tables only, current version) gets
    the features' tables when ``open_store`` opens it, on every driver."""
    if store_url.startswith("sqlite"):
        from harnessrl.store.sqlite import SqliteStore

        SqliteStore.from_url(store_url).close()
    else:
        from harnessrl.store.postgres import PostgresStore

        PostgresStore(store_url).close()
    store = open_store(store_url)
    try:
        assert store.create_deployment("app", {}).name == "app"  # type: ignore[attr-defined]
        assert store.list_deployments()[0].name == "app"  # type: ignore[attr-defined]
    finally:
        store.close()
