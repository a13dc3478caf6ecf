"""The event encoders of the translated APIs on their own: chat deltas in, the API's events out, and the
complete answer equal to what the events add up to (parallel tool calls, reasoning, custom tools)."""

from __future__ import annotations

import orjson

from harnessrl.gateway.apis import anthropic, responses
from harnessrl.gateway.apis.base import ToolName


def _events(payload: bytes) -> list[dict]:
    return [orjson.loads(block.split(b"data: ", 1)[1]) for block in payload.strip().split(b"\n\n")]


DELTAS = [
    {"role": "assistant", "content": ""},
    {"reasoning_content": "Two files "}, {"reasoning_content": "to read."},
    {"content": "Reading "}, {"content": "both."},
    {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "fs__read", "arguments": ""}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]},
    {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                     "function": {"name": "apply_patch", "arguments": '{"input": "*** Begin Patch"}'}}]},
]


def test_anthropic_encoder_blocks_and_parallel_tool_uses():
    enc = anthropic.MessageEncoder("claude")
    out = enc.start(12) + b"".join(enc.feed(d) for d in DELTAS) + enc.finish("tool_calls", None, 12, 30)
    events = _events(out)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    assert kinds.count("content_block_stop") == 4
    partial = "".join(e["delta"]["partial_json"] for e in events
                      if e["type"] == "content_block_delta" and e["index"] == 2)
    assert orjson.loads(partial) == {"path": "a.py"}
    msg = enc.result()
    assert msg["stop_reason"] == "tool_use"
    assert msg["usage"]["input_tokens"] == 12 and msg["usage"]["output_tokens"] == 30
    assert [b["type"] for b in msg["content"]] == starts
    assert msg["content"][0]["thinking"] == "Two files to read." and msg["content"][1]["text"] == "Reading both."
    assert msg["content"][2]["input"] == {"path": "a.py"} and msg["content"][3]["id"] == "call_b"


def test_responses_encoder_items_groups_custom_tools_and_sequence():
    names = {"fs__read": ToolName("read", "fs"), "apply_patch": ToolName("apply_patch", None, "custom")}
    enc = responses.ResponseEncoder("m", {"tools": [], "store": False}, names)
    out = enc.start(12) + b"".join(enc.feed(d) for d in DELTAS) + enc.finish("tool_calls", None, 12, 30)
    events = _events(out)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert done[2]["name"] == "read" and done[2]["namespace"] == "fs" and done[2]["arguments"] == '{"path": "a.py"}'
    assert done[3]["name"] == "apply_patch" and done[3]["input"] == "*** Begin Patch"
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert [i["type"] for i in added] == ["reasoning", "message", "function_call", "custom_tool_call"]
    final = events[-1]["response"]
    assert final["output"] == done and final["usage"]["total_tokens"] == 42 and final["store"] is False
    assert enc.result() == final
    # the conversation kept for previous_response_id names the tools as the policy saw them
    conv = responses.conversation({"messages": [{"role": "user", "content": "x"}]}, 0, final)
    assert [c["function"]["name"] for c in conv[-1]["tool_calls"]] == ["fs__read", "apply_patch"]
