"""What every client test checks once its agent has finished: the tool loop and the record of it."""

from __future__ import annotations

import json

from harnessrl.store import Store
from harnessrl.types import ApiKind, CallStatus, Fidelity

TOOL_NAME = "double"
TOOL_DESCRIPTION = "Double an integer."
PROMPT = "Double a number with the tool, then say what you got."


def double(n: int) -> str:
    """The agents' one tool: its result must come back to the engine exactly as the tool returned it."""
    return str(2 * int(n))


def check_tool_loop(store: Store, rollout_id: str, requests: list[dict], api: ApiKind,
                    final_text: str, *, fidelity: Fidelity | None = Fidelity.EXTENDED) -> None:
    """Two recorded calls with token ids; call 1 asked for the tool, call 2 carried its exact result.

    ``requests`` are the chat requests the engine received for this rollout (in order); ``final_text``
    is what the agent reported as its answer. ``fidelity``: the expected verdict of the second call
    (the fake template is concatenative, so a client that sends history back unchanged gets EXTENDED).
    """
    calls = store.get_calls(rollout_id)
    assert len(calls) == 2, [c.status for c in calls]
    for c in calls:
        assert c.api == api and c.status == CallStatus.OK, (c.api, c.status, c.error)
        assert c.prompt_token_ids and c.completion_token_ids
        assert len(c.choices[0].logprobs) == len(c.completion_token_ids)
    first, second = calls
    assert first.choices[0].finish_reason == "tool_calls"
    # the tool call the engine sampled, as the gateway recorded it
    sampled = json.loads(requests[-1]["messages"][-2]["tool_calls"][0]["function"]["arguments"])
    tool_msg = requests[-1]["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == double(sampled["n"])
    assert requests[-1]["messages"][-2]["tool_calls"][0]["function"]["name"] == TOOL_NAME
    assert second.choices[0].finish_reason == "stop"
    # the answer the agent got is the text the engine produced for the second call
    produced = bytes(t for t in second.completion_token_ids if t < 256).decode()
    assert final_text == produced and final_text
    if fidelity is not None:
        assert second.fidelity == fidelity, (second.fidelity, second.fidelity_reason)
    # the second prompt starts with the first prompt (the history was sent back, not rewritten)
    assert second.prompt_token_ids[: len(first.prompt_token_ids)] == first.prompt_token_ids

