"""Builders shared by the store tests."""

from __future__ import annotations

from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens


def make_call(
    rollout_id: str,
    prompt: list[int],
    *choices: list[int],
    request: dict | None = None,
    status: CallStatus = CallStatus.OK,
) -> NewCall:
    """A call whose choices' logprobs are ``-0.5 * position`` (exactly representable in float32)."""
    return NewCall(
        rollout_id=rollout_id,
        api=ApiKind.CHAT,
        status=status,
        request=request or {"messages": [{"role": "user", "content": "hi"}]},
        response={"id": "cmpl-1", "choices": []},
        prompt_token_ids=prompt,
        choices=[ChoiceTokens(list(c), [-0.5 * i for i in range(len(c))], "stop") for c in choices],
        policy_version=0,
    )
