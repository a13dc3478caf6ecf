"""Token-exact chains: every prompt reuses the rollout's earlier prompt + sampled completion, token for token."""

from __future__ import annotations

import json

import pytest

from harnessrl.gateway.render import TemplateRenderer
from harnessrl.types import Fidelity

IM_END = 2

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}},
]


def text_ids(tok, text: str, stop: bool = True) -> list[int]:
    return tok.encode(text, add_special_tokens=False) + ([IM_END] if stop else [])


def tool_call_text(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def assert_extends(previous, current) -> None:
    rendered_prev, completion_prev = previous[0], previous[1]
    expected = rendered_prev.prompt_token_ids + completion_prev
    assert current[0].prompt_token_ids[: len(expected)] == expected


def test_multi_turn_tool_conversation_reuses_every_turn(harness, smollm2_tokenizer, renderer):
    tok = smollm2_tokenizer
    h = harness(tools=TOOLS)
    h.messages = [{"role": "system", "content": "You are a travel assistant."},
                  {"role": "user", "content": "Is it warm in Paris? Also, what is 2+3?"}]
    # 1: one tool call, the engine returns the stop token.
    _, msg, finish = h.call(text_ids(tok, tool_call_text("get_weather", {"city": "Paris"})))
    assert finish == "tool_calls" and msg["content"] is None
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "18C, sunny"})
    # 2: two tool calls with leading text; this engine strips the stop token.
    two = "Let me check.\n" + tool_call_text("add", {"a": 2, "b": 3}) + "\n" + tool_call_text("get_weather", {"city": "Lyon"})
    _, msg, finish = h.call(text_ids(tok, two, stop=False))
    assert finish == "tool_calls" and [c["function"]["name"] for c in msg["tool_calls"]] == ["add", "get_weather"]
    assert msg["content"] == "Let me check."
    for call, result in zip(msg["tool_calls"], ["5", "20C, cloudy"], strict=True):
        h.messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    # 3: a text answer, then the user asks more.
    _, msg, finish = h.call(text_ids(tok, "Paris is 18C and sunny, and 2+3 is 5."))
    assert finish == "stop" and msg["content"] == "Paris is 18C and sunny, and 2+3 is 5."
    h.messages.append({"role": "user", "content": "And Berlin?"})
    # 4: another tool call.
    _, msg, _ = h.call(text_ids(tok, tool_call_text("get_weather", {"city": "Berlin"})))
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "9C, rain"})
    # 5 and 6: text answers around a user turn.
    h.call(text_ids(tok, "Berlin is 9C with rain."))
    h.messages.append({"role": "user", "content": "Thanks!"})
    h.call(text_ids(tok, "You're welcome."))

    assert len(h.calls) == 6
    assert h.calls[0][0].fidelity == Fidelity.RERENDERED
    ids = [c["id"] for m in h.messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert len(set(ids)) == len(ids) == 4
    for i in range(1, 6):
        rendered = h.calls[i][0]
        assert rendered.fidelity == Fidelity.EXTENDED, rendered.fidelity_reason
        assert rendered.parent == i - 1
        assert_extends(h.calls[i - 1], h.calls[i])
    # The glue is the template's: with canonical completions the token-exact prompt is the template's text.
    final_text = renderer.render_text(
        [m for m in h.body()["messages"][:-1]], TOOLS, generation=True)  # up to the last user turn
    assert tok.decode(h.calls[5][0].prompt_token_ids) == final_text
    # Turn 2's engine stripped the stop token: the end-of-turn token is appended as context and recorded.
    assert h.calls[2][0].end_of_turn_appended == 2 and "did not sample" in h.calls[2][0].fidelity_reason
    assert h.calls[1][0].end_of_turn_appended == 1 and h.calls[1][0].fidelity_reason is None


def test_noncanonical_completion_is_reused_where_naive_retokenization_differs(harness, smollm2_tokenizer, renderer):
    tok = smollm2_tokenizer
    h = harness()
    h.messages = [{"role": "user", "content": "What is the capital of France?"}]
    # The policy sampled " Paris." one character at a time: valid tokens, not the canonical encoding.
    head = tok.encode("The capital of France is", add_special_tokens=False)
    chars = tok.convert_tokens_to_ids(["Ġ", "P", "a", "r", "i", "s", "."])
    sampled = head + chars + [IM_END]
    canonical = text_ids(tok, "The capital of France is Paris.")
    assert tok.decode(sampled) == tok.decode(canonical) and sampled != canonical
    first, msg, _ = h.call(sampled)
    assert msg["content"] == "The capital of France is Paris."
    h.messages.append({"role": "user", "content": "And of Italy?"})
    second, _, _ = h.call(text_ids(tok, "Rome."))

    prefix = first.prompt_token_ids + sampled
    # The problem: re-rendering and re-tokenizing the history does not give back what was sampled.
    naive = tok.encode(renderer.render_text(h.body()["messages"][:-1], None, generation=True), add_special_tokens=False)
    assert naive[: len(prefix)] != prefix
    assert canonical[:-1] == naive[len(first.prompt_token_ids): len(first.prompt_token_ids) + len(canonical) - 1]
    # The fix: the gateway's prompt starts with exactly the sampled tokens.
    assert second.prompt_token_ids[: len(prefix)] == prefix
    assert second.fidelity == Fidelity.EXTENDED


def test_summarizing_harness_starts_a_new_chain_and_keeps_the_old_one(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness()
    h.messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Count to three."}]
    h.call(text_ids(tok, "One."))
    h.messages.append({"role": "user", "content": "Next?"})
    h.call(text_ids(tok, "Two."))
    # The harness replaces its history with a summary.
    h.messages = [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Summary: we counted to two. Continue."}]
    summary, _, _ = h.call(text_ids(tok, "Three."))
    assert summary.fidelity == Fidelity.RERENDERED
    assert "no earlier call" in summary.fidelity_reason and summary.reused_tokens == 0
    h.messages.append({"role": "user", "content": "Done?"})
    after, _, _ = h.call(text_ids(tok, "Yes."))
    assert after.fidelity == Fidelity.EXTENDED and after.parent == 2
    assert_extends(h.calls[2], h.calls[3])
    # The first chain is still there: a sub-agent continuing the original history extends call 1.
    branch = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Count to three."},
              h.calls[0][2], {"role": "user", "content": "Next?"}, h.calls[1][2], {"role": "user", "content": "Go on."}]
    rendered = h.renderer.render("r1", {"messages": branch})
    assert rendered.fidelity == Fidelity.EXTENDED and rendered.parent == 1
    assert_extends(h.calls[1], (rendered,))


def test_retries_of_one_turn_each_keep_their_own_tokens(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness()
    h.messages = [{"role": "user", "content": "Pick a colour."}]
    h.call(text_ids(tok, "Red."), keep=False)
    h.call(text_ids(tok, "Blue."), keep=False)
    h.call(text_ids(tok, "Green."), keep=False)
    for index, message in [(1, h.calls[1][2]), (0, h.calls[0][2]), (2, h.calls[2][2])]:
        body = {"messages": h.messages + [message, {"role": "user", "content": "Why?"}]}
        rendered = h.renderer.render("r1", body)
        assert rendered.fidelity == Fidelity.EXTENDED and rendered.parent == index
        assert_extends(h.calls[index], (rendered,))
    # All three retries were rendered from the same conversation, so their prompts are identical.
    assert h.calls[0][0].prompt_token_ids == h.calls[1][0].prompt_token_ids == h.calls[2][0].prompt_token_ids


def test_changed_tools_break_the_prefix_with_a_reason(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness(tools=TOOLS)
    h.messages = [{"role": "user", "content": "Weather in Oslo?"}]
    _, msg, _ = h.call(text_ids(tok, tool_call_text("get_weather", {"city": "Oslo"})))
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "-2C"})
    h.tools = TOOLS[:1]
    rendered, _, _ = h.call(text_ids(tok, "It is -2C."))
    assert rendered.fidelity == Fidelity.RERENDERED and "tool definitions changed" in rendered.fidelity_reason
    # Same tools again, reordered keys inside a definition: semantically equal, so the new chain extends.
    h.tools = [json.loads(json.dumps(TOOLS[0], sort_keys=True))]
    h.messages.append({"role": "user", "content": "Thanks"})
    again, _, _ = h.call(text_ids(tok, "Bye."))
    assert again.fidelity == Fidelity.EXTENDED and again.parent == 1


def test_harness_reserializing_messages_still_matches(harness, smollm2_tokenizer):
    """Content as text parts, arguments re-dumped with other spacing/key order, stripped text: same turn."""
    tok = smollm2_tokenizer
    h = harness(tools=TOOLS)
    h.messages = [{"role": "user", "content": [{"type": "text", "text": "Add 1 and 2"}]}]
    _, msg, _ = h.call(text_ids(tok, " " + tool_call_text("add", {"a": 1, "b": 2})))
    echoed = {"role": "assistant", "content": "", "tool_calls": [{
        "id": msg["tool_calls"][0]["id"], "type": "function",
        "function": {"name": "add", "arguments": '{"b":2,  "a":1}'}}]}
    h.messages[-1:] = [h.messages[-1], echoed]
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "3"})
    rendered, _, _ = h.call(text_ids(tok, "3"))
    assert rendered.fidelity == Fidelity.EXTENDED
    assert_extends(h.calls[0], h.calls[1])


def test_length_cut_completion_gets_end_of_turn_context(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness()
    h.messages = [{"role": "user", "content": "Write a long story."}]
    cut = text_ids(tok, "Once upon a time there", stop=False)
    h.call(cut, finish_reason="length")
    assert h.calls[0][3] == "length"
    h.messages.append({"role": "user", "content": "Shorter please."})
    rendered, _, _ = h.call(text_ids(tok, "Once."))
    start = len(h.calls[0][0].prompt_token_ids) + len(cut)
    assert rendered.prompt_token_ids[start: start + 2] == [IM_END, tok.encode("\n")[0]]
    assert rendered.end_of_turn_appended == 2 and "did not sample" in rendered.fidelity_reason


def test_continuing_the_last_answer_is_exact(harness, smollm2_tokenizer):
    tok = smollm2_tokenizer
    h = harness()
    h.messages = [{"role": "user", "content": "List three fruits."}]
    cut = text_ids(tok, "Apple, banana", stop=False)
    h.call(cut, finish_reason="length")
    rendered, _, _ = h.call(text_ids(tok, ", cherry."))
    assert rendered.fidelity == Fidelity.EXACT
    assert rendered.prompt_token_ids == h.calls[0][0].prompt_token_ids + cut


def test_template_that_rewrites_earlier_turns_falls_back_with_reason(smollm2_tokenizer):
    from harnessrl.gateway.render import RenderConfig

    # This template numbers the conversation length in the system turn, so earlier turns change.
    unstable = ("<|im_start|>system\n{{ messages|length }} messages<|im_end|>\n{% for m in messages %}"
                "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    renderer = TemplateRenderer(smollm2_tokenizer, RenderConfig(chat_template=unstable))
    body = {"messages": [{"role": "user", "content": "Hi"}]}
    first = renderer.render("r", body)
    completion = text_ids(smollm2_tokenizer, "Hello!")
    message, _ = renderer.parse("r", completion, "stop")
    renderer.remember("r", body, first, completion, message)
    second = renderer.render("r", {"messages": body["messages"] + [message, {"role": "user", "content": "Bye"}]})
    assert second.fidelity == Fidelity.RERENDERED and "differently" in second.fidelity_reason


def test_load_after_restart_continues_the_chain(harness, smollm2_tokenizer):
    from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens

    tok = smollm2_tokenizer
    h = harness(tools=TOOLS)
    h.messages = [{"role": "user", "content": "Weather in Rome?"}]
    bodies = [h.body()]
    _, msg, _ = h.call(text_ids(tok, tool_call_text("get_weather", {"city": "Rome"}), stop=False))
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "25C"})
    bodies.append(h.body())
    h.call(text_ids(tok, "25C in Rome."))
    stored = [
        Call(rollout_id="r1", index=i, api=ApiKind.CHAT, status=CallStatus.OK, request=body,
             response={"choices": [{"index": 0, "message": message, "finish_reason": finish}]},
             prompt_token_ids=rendered.prompt_token_ids,
             choices=[ChoiceTokens(completion, [0.0] * len(completion), finish)], policy_version=0)
        for i, (body, (rendered, completion, message, finish)) in enumerate(zip(bodies, h.calls, strict=True))
    ]
    h.messages.append({"role": "user", "content": "And Milan?"})
    next_body = h.body()
    expected = h.renderer.render("r1", next_body)
    fresh = TemplateRenderer(smollm2_tokenizer)
    fresh.load("r1", stored)
    restored = fresh.render("r1", next_body)
    assert restored.prompt_token_ids == expected.prompt_token_ids
    assert restored.fidelity == Fidelity.EXTENDED and restored.parent == 1
    # Tool-call ids keep counting where the stored responses left off.
    message, _ = fresh.parse("r1", text_ids(tok, tool_call_text("get_weather", {"city": "Milan"})), "stop")
    assert message["tool_calls"][0]["id"] == "call_r1_1"


def test_chain_with_a_model_template_that_handles_tools_itself(harness):
    """The tiny test model's own ChatML+tools template (no newline around <tool_call>, tool role kept)."""
    models = pytest.importorskip("harnessrl.models")
    tok = models.tiny_tokenizer()
    renderer = TemplateRenderer(tok)
    assert renderer.template_name == "model" and renderer.tool_parser_name == "hermes"
    h = harness(renderer=renderer, tools=TOOLS[:1])
    h.messages = [{"role": "user", "content": "weather in paris"}]
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "paris"}}</tool_call>'
    _, msg, finish = h.call(text_ids(tok, call, stop=False))
    assert finish == "tool_calls"
    h.messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "sunny"})
    h.call(text_ids(tok, "it is sunny"))
    h.messages.append({"role": "user", "content": "thank you"})
    h.call(text_ids(tok, "bye"))
    for i in (1, 2):
        assert h.calls[i][0].fidelity == Fidelity.EXTENDED
        assert_extends(h.calls[i - 1], h.calls[i])


def test_interleaved_sub_agent_chains_each_extend_their_own_previous_call(harness, smollm2_tokenizer, renderer):
    tok = smollm2_tokenizer
    main = harness(rollout_id="shared")
    sub = harness(rollout_id="shared")  # same rollout: a sub-agent with its own system prompt
    main.messages = [{"role": "system", "content": "You are the planner."}, {"role": "user", "content": "Plan."}]
    sub.messages = [{"role": "system", "content": "You are the coder."}, {"role": "user", "content": "Code."}]
    for step in range(3):
        for agent, name in ((main, "plan"), (sub, "code")):
            rendered, _, _ = agent.call(text_ids(tok, f"{name} step {step}"))
            if step:
                assert rendered.fidelity == Fidelity.EXTENDED
                assert_extends(agent.calls[step - 1], agent.calls[step])
            agent.messages.append({"role": "user", "content": f"continue {step}"})
    parents = [c[0].parent for c in main.calls + sub.calls]
    assert parents == [None, 0, 2, None, 1, 3]  # calls are numbered in the order the rollout made them
