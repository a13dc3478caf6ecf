"""The store suite's fixtures (a fresh store on every driver) for the production tests."""

from unit.store.conftest import store, store_url  # noqa: F401
