"""Parsing completions into OpenAI tool calls, and rendering tools with the SmolLM2 (hermes-chatml) template."""

from __future__ import annotations

import json

import pytest

from harnessrl.gateway.render import HERMES_CHATML, RenderConfig, RenderError, TemplateRenderer
from harnessrl.gateway.render.templates import TemplateNotFound
from harnessrl.gateway.render.toolcalls import HermesToolCallParser, UnknownToolParser, make_tool_parser

IM_END = 2


@pytest.mark.parametrize(
    "text, content, calls",
    [
        ("Just text.", "Just text.", []),
        ('<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>', None, [("f", {"x": 1})]),
        ('Sure.\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n<tool_call>{"name": "g", "arguments": '
         '{"s": "a</b"}}</tool_call>', "Sure.", [("f", {}), ("g", {"s": "a</b"})]),
        ('<tool_call>\n{"name": "f", "arguments": {"x": [1, 2]}}', None, [("f", {"x": [1, 2]})]),  # unclosed
        ('<tool_call>{"name": "f", "parameters": {"y": "z"}}</tool_call>', None, [("f", {"y": "z"})]),
        ('<tool_call>{"name": "f", "arguments": "{\\"q\\": 2}"}</tool_call>', None, [("f", {"q": 2})]),
        ('<tool_call>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]</tool_call>', None,
         [("f", {"a": 1}), ("g", {})]),  # a list of calls in one block
    ],
)
def test_hermes_parser_reads_tool_calls(text, content, calls):
    parsed = HermesToolCallParser().parse(text)
    assert parsed.content == content
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == calls
    assert all(isinstance(c.arguments, str) for c in parsed.tool_calls)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "f", "arguments": {"x": </tool_call>',  # broken JSON
        '<tool_call>{"arguments": {}}</tool_call>',  # no name
        '<tool_call>["f"]</tool_call>',
        '<tool_call>[]</tool_call>',
        '<tool_call>[{"name": "f", "arguments": {}}, 3]</tool_call>',
        'ok <tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_call>nope</tool_call>',  # one bad block
        "<tool_call>",
    ],
)
def test_unparseable_tool_calls_are_text(text):
    parsed = HermesToolCallParser().parse(text)
    assert parsed.tool_calls == [] and parsed.content == text


def test_unparseable_tool_call_through_the_renderer_is_plain_content(renderer, smollm2_tokenizer):
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    message, finish = renderer.parse("r", ids, "length")
    assert message == {"role": "assistant", "content": text} and finish == "length"
    message, finish = renderer.parse("r", ids + [IM_END], "stop")
    assert message["content"] == text and "tool_calls" not in message and finish == "stop"


def test_tool_call_ids_are_deterministic_per_rollout(smollm2_tokenizer):
    text = '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call>'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False) + [IM_END]
    for _ in range(2):  # two gateways given the same calls hand out the same ids
        renderer = TemplateRenderer(smollm2_tokenizer)
        first, finish = renderer.parse("a", ids, "stop")
        second, _ = renderer.parse("a", ids, "stop")
        other, _ = renderer.parse("b", ids, "stop")
        assert finish == "tool_calls"
        assert [c["id"] for c in first["tool_calls"] + second["tool_calls"]] == [f"call_a_{i}" for i in range(4)]
        assert [c["id"] for c in other["tool_calls"]] == ["call_b_0", "call_b_1"]


def test_smollm2_gets_the_hermes_template_because_its_own_ignores_tools(renderer, smollm2_tokenizer):
    assert "tools" not in smollm2_tokenizer.chat_template
    assert renderer.template_name == "hermes-chatml" and renderer.tool_parser_name == "hermes"
    assert renderer.end_of_turn_text == "<|im_end|>\n" and renderer.stop_token_ids == [IM_END]
    own = TemplateRenderer(smollm2_tokenizer, RenderConfig(chat_template="model"))
    assert own.template_name == "model" and own.tool_parser_name == "none"


def test_hermes_template_renders_tools_calls_and_grouped_results(renderer):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
            {"id": "2", "type": "function", "function": {"name": "f", "arguments": '{"a": 2}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": "one"},
        {"role": "tool", "tool_call_id": "2", "content": "two"},
    ]
    text = renderer.render_text(messages, tools, generation=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert '<tools>\n{"type": "function", "function": {"name": "f"' in text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
            '<tool_call>\n{"name": "f", "arguments": {"a": 2}}\n</tool_call><|im_end|>\n') in text
    assert text.endswith("<|im_start|>user\n<tool_response>\none\n</tool_response>\n<tool_response>\ntwo\n"
                         "</tool_response><|im_end|>\n<|im_start|>assistant\n")
    # Without tools and with a system message it is SmolLM2's own ChatML rendering.
    plain = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert renderer.render_text(plain, None, generation=True) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n")


def test_template_and_parser_choices():
    class NoTemplate:
        chat_template = None

        def get_vocab(self):
            return {"a": 0}

    from harnessrl.gateway.render import resolve_chat_template

    with pytest.raises(TemplateNotFound):
        resolve_chat_template(NoTemplate(), "auto")
    with pytest.raises(TemplateNotFound):
        resolve_chat_template(NoTemplate(), "no-such-template")
    assert resolve_chat_template(NoTemplate(), "hermes-chatml") == ("hermes-chatml", HERMES_CHATML)
    assert make_tool_parser("auto", "{{ '<tool_call>' }}")[0] == "hermes"
    assert make_tool_parser("auto", "{{ messages }}")[0] == "none"
    with pytest.raises(UnknownToolParser):
        make_tool_parser("mistral", "")


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": "hi"},
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        {"messages": [{"role": "user", "content": "x"}], "tools": "nope"},
    ],
)
def test_malformed_requests_raise_render_error(renderer, body):
    with pytest.raises(RenderError):
        renderer.render("r", body)
