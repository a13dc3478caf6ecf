"""Token-exact chains and tool calls with the templates the coding harnesses' models use (fixtures in
``templates/``, written after the published Qwen3, Qwen3-Coder and Llama 3.1 templates; no hub access).

- Qwen3 drops an earlier turn's thinking once a later user turn exists: the sampled tokens are kept, only
  what follows the turn is taken from the template.
- Qwen3-Coder / Qwen3.5 write tool calls in an XML form; Llama 3.x as a bare JSON object.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.gateway.render import RenderConfig, TemplateRenderer
from harnessrl.gateway.render.messages import normalize_conversation
from harnessrl.gateway.render.toolcalls import make_tool_parser
from harnessrl.types import Fidelity

TEMPLATES = Path(__file__).parent / "templates"
IM_END = 2
TOOLS = [{"type": "function", "function": {
    "name": "run", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "timeout": {"type": "integer"}},
                   "required": ["cmd"]}}}]


def renderer_for(tokenizer, name: str) -> TemplateRenderer:
    return TemplateRenderer(tokenizer, RenderConfig(chat_template=str(TEMPLATES / f"{name}.jinja")))


def ids(tok, text: str, stop: bool = True) -> list[int]:
    return tok.encode(text, add_special_tokens=False) + ([IM_END] if stop else [])


def extends(prev, cur) -> bool:
    base = prev[0].prompt_token_ids + prev[1]
    return cur[0].prompt_token_ids[: len(base)] == base


@pytest.mark.parametrize("name, parser", [("qwen3", "hermes"), ("qwen3_coder", "qwen3_coder"),
                                          ("llama3", "llama3_json")])
def test_auto_picks_the_family_tool_parser(name, parser):
    assert make_tool_parser("auto", (TEMPLATES / f"{name}.jinja").read_text())[0] == parser


def test_qwen3_thinking_dropped_by_the_template_keeps_the_sampled_tokens(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    r = renderer_for(tok, "qwen3")
    h = harness(renderer=r)
    h.messages = [{"role": "user", "content": "What is 2+3?"}]
    first, msg, _ = h.call(ids(tok, "<think>\nAdd them.\n</think>\n\n2+3 is 5."))
    assert msg["content"] == "2+3 is 5." and msg["reasoning_content"] == "Add them."
    h.messages.append({"role": "user", "content": "And 4+4?"})
    second, _, _ = h.call(ids(tok, "<think>\nAgain.\n</think>\n\n8."))
    assert second.fidelity == Fidelity.EXTENDED and "sampled tokens were kept" in second.fidelity_reason
    assert extends(h.calls[0], h.calls[1])
    # the template itself would have rendered the first answer without its thinking; the tokens keep it
    text = r.render_text([{"role": "user", "content": "What is 2+3?"},
                          {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n2+3 is 5."},
                          {"role": "user", "content": "And 4+4?"}], None, generation=True)
    assert "Add them." not in text and tok.decode(second.prompt_token_ids).count("Add them.") == 1
    assert tok.decode(second.prompt_token_ids).endswith("<|im_start|>user\nAnd 4+4?<|im_end|>\n<|im_start|>assistant\n")


def test_qwen3_tool_loop_with_thinking_extends_every_turn(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness(renderer=renderer_for(tok, "qwen3"), tools=TOOLS)
    h.messages = [{"role": "system", "content": "You are a coder."}, {"role": "user", "content": "List files."}]
    call = '<tool_call>\n{"name": "run", "arguments": {"cmd": "ls"}}\n</tool_call>'
    _, msg, finish = h.call(ids(tok, "<think>\nUse ls.\n</think>\n\n" + call))
    assert finish == "tool_calls" and json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"cmd": "ls"}
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "a.py b.py"})
    h.call(ids(tok, "<think>\nDone.\n</think>\n\nTwo files: a.py and b.py."))
    h.messages.append({"role": "user", "content": "Thanks"})
    h.call(ids(tok, "<think>\n</think>\n\nYou're welcome."))
    for i in (1, 2):
        assert h.calls[i][0].fidelity == Fidelity.EXTENDED, h.calls[i][0].fidelity_reason
        assert extends(h.calls[i - 1], h.calls[i])


def test_qwen3_coder_xml_tool_calls_parse_and_chain(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    r = renderer_for(tok, "qwen3_coder")
    h = harness(renderer=r, tools=TOOLS)
    h.messages = [{"role": "user", "content": "Run the tests."}]
    xml = ("<tool_call>\n<function=run>\n<parameter=cmd>\npytest -q\n</parameter>\n<parameter=timeout>\n60\n"
           "</parameter>\n</function>\n</tool_call>")
    _, msg, finish = h.call(ids(tok, xml))
    assert finish == "tool_calls" and msg["content"] is None
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"cmd": "pytest -q", "timeout": 60}
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "3 passed"})
    second, _, _ = h.call(ids(tok, "All 3 tests pass."))
    assert second.fidelity == Fidelity.EXTENDED and extends(h.calls[0], h.calls[1])
    # the template writes the parsed call back exactly as it was sampled
    text = r.render_text(normalize_conversation(h.body()["messages"][:2]).messages, TOOLS, generation=False)
    assert xml in text
    # malformed XML stays text (the harness shows the model its mistake)
    bad, _ = r.parse("x", ids(tok, "<tool_call>\n<function=run>\n<parameter=cmd>\nls"), "stop")
    assert bad["content"].startswith("<tool_call>") and "tool_calls" not in bad


def test_llama3_json_tool_calls_parse_and_chain(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    r = renderer_for(tok, "llama3")
    h = harness(renderer=r, tools=TOOLS)
    h.messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Show the date."}]
    _, msg, finish = h.call(ids(tok, '{"name": "run", "parameters": {"cmd": "date"}}'))
    assert finish == "tool_calls" and msg["tool_calls"][0]["function"]["name"] == "run"
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "Mon Dec 1"})
    second, _, _ = h.call(ids(tok, "It is Monday, December 1."))
    assert second.fidelity == Fidelity.EXTENDED and extends(h.calls[0], h.calls[1])
    text, _ = r.parse("x", ids(tok, 'The JSON is {"a": 1}.'), "stop")
    assert text["content"] == 'The JSON is {"a": 1}.' and "tool_calls" not in text


def test_qwen3_thinking_becomes_reasoning_content_streamed_and_whole(smollm2_tokenizer):
    tok = smollm2_tokenizer
    r = renderer_for(tok, "qwen3")
    assert r.thinks
    call = '<tool_call>\n{"name": "run", "arguments": {"cmd": "ls"}}\n</tool_call>'
    text = "<think>\nI should list\nthe files.\n</think>\n\nLet me look.\n" + call
    completion = ids(tok, text)
    whole, finish = r.parse("w", completion, "stop")
    assert whole["reasoning_content"] == "I should list\nthe files." and whole["content"] == "Let me look."
    assert finish == "tool_calls" and whole["tool_calls"][0]["function"]["name"] == "run"
    sp = r.stream_parse("s")
    pieces = {"reasoning_content": [], "content": []}
    for t in completion:
        for key, value in sp.add([t]).items():
            pieces[key].append(value)
    message, finish, rest = sp.finish("stop")
    assert len(pieces["reasoning_content"]) > 2 and len(pieces["content"]) >= 2
    assert "".join(pieces["reasoning_content"]) + rest.get("reasoning_content", "") == "I should list\nthe files."
    sent = "".join(pieces["content"])
    assert "<tool" not in sent and "think>" not in sent and sent.startswith("Let me look.")
    assert message["content"] == sent and rest["tool_calls"][0]["function"]["name"] == "run"
    # without thinking tags nothing changes
    plain, _ = r.parse("p", ids(tok, "Just an answer."), "stop")
    assert plain == {"role": "assistant", "content": "Just an answer."}
    # a completion cut off while thinking is all reasoning
    cut, _ = r.parse("c", ids(tok, "<think>\nStill thinking", stop=False), "length")
    assert cut["reasoning_content"] == "Still thinking" and cut["content"] == ""
