"""Fixtures of the judge tests: a scripted judge model on loopback and a fresh SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_engine import EngineServer
from fakes.scripted_judge import ScriptedJudge

from harnessrl.store import Store, open_store


@pytest.fixture
def judge_server() -> Iterator[EngineServer]:
    srv = EngineServer(ScriptedJudge()).start()  # type: ignore[arg-type]
    yield srv
    srv.stop()


@pytest.fixture
def scripted(judge_server: EngineServer) -> ScriptedJudge:
    return judge_server.engine  # type: ignore[return-value]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path}/store.db")
    yield s
    s.close()
