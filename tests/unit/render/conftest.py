"""The SmolLM2 tokenizer for render tests, read from the packaged GGUF once and cached as a folder."""

from __future__ import annotations

import pytest
from render_tokenizers import load_smollm2_tokenizer


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
    """``harness(tools=..., rollout_id=..., renderer=...)``: a scripted harness on the SmolLM2 renderer."""
    return lambda renderer=renderer, **kw: Harness(renderer, **kw)
