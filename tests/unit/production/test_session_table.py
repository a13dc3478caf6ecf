"""``SessionTable`` over a real store (both drivers), without HTTP: one opening however many calls race
for a new session, counted calls written by ``flush``, idle sessions dropped from memory only."""

from __future__ import annotations

import asyncio
import time

import pytest

from harnessrl.gateway.rollout_registry import RolloutRegistry
from harnessrl.production.arms import ArmPlan
from harnessrl.production.config import FeedbackConfig, ProductionConfig
from harnessrl.production.sessions import SessionClosed, SessionTable
from harnessrl.store import Store


def _table(store: Store, **config: object) -> tuple[SessionTable, RolloutRegistry]:
    registry = RolloutRegistry(store)
    return SessionTable(store, registry, ArmPlan(None, lambda: 7), ProductionConfig(**config)), registry


def test_racing_first_calls_open_one_session(store: Store) -> None:
    store.create_deployment("support", {})
    table, registry = _table(store)

    async def main() -> list:
        return await asyncio.gather(*(table.get("support", "s1", "key_1", derived=False, record_fraction=1.0)
                                      for _ in range(8)))

    lives = asyncio.run(main())
    assert len({id(live) for live in lives}) == 1 and table.opened == 1
    live = lives[0]
    session = store.get_session("support", "s1")
    assert session.rollout_id == live.state.id and session.policy_version == 7 and live.state.record
    assert asyncio.run(registry.load(live.state.id)) is live.state  # the registry knows the session's rollout


def test_calls_are_written_by_flush(store: Store) -> None:
    store.create_deployment("support", {})
    table, _ = _table(store, feedback=FeedbackConfig(window_s=100.0))

    async def main() -> None:
        live = await table.get("support", "s1", "k", derived=False, record_fraction=0.0)
        assert not live.state.record and live.state.id.startswith("unrecorded:")
        for _ in range(3):
            table.touch(live)
        assert store.get_session("support", "s1").calls == 0  # nothing written yet
        await table.flush()

    asyncio.run(main())
    s = store.get_session("support", "s1")
    assert s.calls == 3 and s.rollout_id is None
    assert s.feedback_closes_at == pytest.approx(s.last_call_at + 100.0)


def test_idle_sessions_leave_memory_not_the_store(store: Store) -> None:
    store.create_deployment("support", {})
    table, registry = _table(store, session_idle_s=0.2)

    async def main() -> None:
        live = await table.get("support", "s1", "k", derived=False, record_fraction=1.0)
        table.touch(live)
        await table.flush()
        time.sleep(0.3)
        assert table.sweep() == 1
        again = await table.get("support", "s1", "k", derived=False, record_fraction=1.0)  # reloaded
        assert again is not live and again.state.id == live.state.id and table.opened == 1

    asyncio.run(main())


def test_a_named_session_past_its_window_is_refused(store: Store) -> None:
    store.create_deployment("support", {})
    table, _ = _table(store, feedback=FeedbackConfig(window_s=0.2))

    async def main() -> None:
        await table.get("support", "s1", "k", derived=False, record_fraction=1.0)
        time.sleep(0.3)
        with pytest.raises(SessionClosed, match="s1"):
            await table.get("support", "s1", "k", derived=False, record_fraction=1.0)
        derived = await table.get("support", "p-abc", "k", derived=True, record_fraction=1.0)
        time.sleep(0.3)
        assert (await table.get("support", "p-abc", "k", derived=True, record_fraction=1.0)).id == "p-abc.1"
        assert derived.id == "p-abc"

    asyncio.run(main())
