from __future__ import annotations

import pytest

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine
from harnessrl.models import tiny_model


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer) of the seeded tiny random model; shared read-only by a module's tests."""
    return tiny_model()


@pytest.fixture
def engine(tiny):
    model, tokenizer = tiny
    eng = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256))
    yield eng
    eng.close()
