"""Streaming a rendered completion: text goes out as sampled, a tool call is held and parsed whole."""

from __future__ import annotations


def _stream(renderer, ids: list[int]) -> tuple[list[str], dict, str, dict]:
    sp = renderer.stream_parse("r1")
    pieces = []
    for t in ids:
        delta = sp.add([t])
        if delta.get("content"):
            pieces.append(delta["content"])
    message, finish, rest = sp.finish("stop")
    return pieces, message, finish, rest


def test_text_streams_token_by_token_and_matches_the_whole_parse(renderer, smollm2_tokenizer):
    text = "Hello there, héllo wörld! Ünïcode streams fine."
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    pieces, message, finish, rest = _stream(renderer, ids)
    assert len(pieces) > 5 and "".join(pieces) + rest.get("content", "") == text
    assert message == {"role": "assistant", "content": text} and finish == "stop"


def test_tool_call_is_held_back_and_parsed_at_the_end(renderer, smollm2_tokenizer):
    text = 'Let me look.\n<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    pieces, message, finish, rest = _stream(renderer, ids)
    sent = "".join(pieces)
    assert "<tool" not in sent and sent.startswith("Let me look.")
    assert finish == "tool_calls" and rest["tool_calls"][0]["function"]["name"] == "ls"
    assert message["content"] == sent  # what the harness received is what it will send back
    # the same tokens parsed whole give the same call
    whole, _ = renderer.parse("r2", ids, "stop")
    assert whole["tool_calls"][0]["function"] == rest["tool_calls"][0]["function"]


def test_a_marker_prefix_that_is_not_a_tool_call_is_sent_at_the_end(renderer, smollm2_tokenizer):
    text = "a < b and <tool is not a call"
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    pieces, message, finish, rest = _stream(renderer, ids)
    assert "".join(pieces) + rest.get("content", "") == text and finish == "stop"
