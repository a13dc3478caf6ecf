"""Fixtures for training tests."""

from __future__ import annotations

import pytest
from transformers import LlamaForCausalLM

from ._helpers import tiny_llama


@pytest.fixture
def tiny_model() -> LlamaForCausalLM:
    return tiny_llama()
