"""Reading engines' context-length refusals (vLLM's wordings over versions, the embedded engine's)."""

from __future__ import annotations

import pytest

from harnessrl.gateway.dialect import Plan
from harnessrl.gateway.engine_hop import fit_context
from harnessrl.gateway.errors import LimitExceeded


def plan(max_tokens: int, asked: int | None = None) -> Plan:
    return Plan(upstream={"max_tokens": max_tokens}, sampling={"max_tokens": max_tokens}, stream=False,
                want_logprobs=False, want_token_ids=False, max_tokens=max_tokens, n=1, asked=asked)


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 8192 tokens. However, you requested 64300 tokens (300 in the "
    "messages, 64000 in the completion). Please reduce the length of the messages or completion.",
    "'max_tokens' or 'max_completion_tokens' is too large: 64000. This model's maximum context length is 8192 "
    "tokens and your request has 300 input tokens (64000 > 8192 - 300).",
    "This model's maximum context length is 8192 tokens. However, you requested 64300 tokens (300 in the "
    "prompt, 64000 for the completion). Reduce the prompt or max_tokens.",
])
def test_max_tokens_over_the_context_is_lowered_to_the_room_left(message):
    p = plan(64000, asked=64000)
    assert fit_context(p, message.encode()) is True
    assert p.upstream["max_tokens"] == p.sampling["max_tokens"] == p.max_tokens == 8192 - 300
    assert p.sampling["max_tokens_requested"] == 64000 and p.sampling["max_tokens_clamp"] == "context"
    assert fit_context(p, message.encode()) is False  # already fits: the engine's own error stands
    unasked = plan(64000)  # a limit the gateway sent (the rollout's budget), not what the harness asked
    assert fit_context(unasked, message.encode()) is True and unasked.max_tokens == 8192 - 300
    assert "max_tokens_requested" not in unasked.sampling


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. "
    "Please reduce the length of the input messages.",
    "The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that "
    "`max_model_len` is no smaller than the number of text tokens.",
    "This model's maximum context length is 8192 tokens. However, your prompt has 9000 tokens, which leaves "
    "no room for a completion. Shorten the prompt.",
])
def test_a_prompt_over_the_context_names_both_numbers(message):
    with pytest.raises(LimitExceeded) as info:
        fit_context(plan(100), message.encode())
    assert "9000 tokens" in info.value.message and "8192 tokens" in info.value.message
    assert info.value.code == "context_length_exceeded" and info.value.status == 400


def test_other_errors_pass_through():
    assert fit_context(plan(10), b'{"error": {"message": "temperature must be >= 0"}}') is False
