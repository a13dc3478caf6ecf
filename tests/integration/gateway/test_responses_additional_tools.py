"""Codex's ``additional_tools`` input item (issue 53 item 0): the tools Codex 0.163+ declares there, not in
top-level ``tools``, reach the policy exactly as top-level ones do (namespaced function tools flattened and
their calls mapped back to name and namespace, free-form custom tools as one-string functions), with the
official openai client; a tool there of a kind the policy cannot be offered is refused naming the kind,
never dropped. Before, the item was recorded as ignored and the policy saw no tools at all."""

from __future__ import annotations

import openai
import pytest

from harnessrl.types import ApiKind, CallStatus

#: Codex's default model name, not the examples' ``policy``: any name is served by the policy.
MODEL = "gpt-5.1-codex"
READ = {"type": "function", "name": "read_file", "description": "Read a file", "strict": False,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
NAMESPACE = {"type": "namespace", "name": "mcp__fs", "description": "files", "tools": [READ]}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
EXEC = {"type": "function", "name": "exec_command", "description": "Run a command", "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
USER = {"role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]}


def _additional(*tools: dict) -> dict:
    return {"type": "additional_tools", "role": "developer", "tools": list(tools)}


def test_additional_tools_reach_the_policy_as_top_level_tools_do(gw) -> None:
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    top = c.responses.create(model=MODEL, input=[USER], tools=[NAMESPACE, PATCH, EXEC])
    offered_top = gw.engine.requests[-1]["tools"]
    codex = c.responses.create(model=MODEL, input=[_additional(NAMESPACE, PATCH, EXEC), USER])
    offered = gw.engine.requests[-1]["tools"]
    assert offered == offered_top
    assert [t["function"]["name"] for t in offered] == ["mcp__fs__read_file", "apply_patch", "exec_command"]
    assert gw.engine.requests[-1]["messages"] == [{"role": "user", "content": "fix the bug"}]
    # the fake engine calls the first tool: the call comes back under the harness's own name and group
    (call,) = [o for o in codex.output if o.type == "function_call"]
    assert (call.name, call.namespace) == ("read_file", "mcp__fs")
    assert [o.name for o in top.output if o.type == "function_call"] == ["read_file"]
    rec = gw.store.get_calls(r.id)[1]
    assert rec.api == ApiKind.RESPONSES and rec.status == CallStatus.OK
    adjusted = rec.sampling["adjusted"]
    assert adjusted["additional_tools"] == ["input[0]"] and "ignored_items" not in adjusted
    assert rec.request["input"][0]["type"] == "additional_tools"  # the harness's own request is kept


def test_a_custom_tool_in_additional_tools_is_called_as_a_custom_tool_streamed(gw) -> None:
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    group = {"type": "namespace", "name": "functions", "description": "code mode", "tools": [
        {"type": "custom", "name": "exec", "description": "run code", "format": {"type": "text"}}]}
    with c.responses.stream(model=MODEL, input=[_additional(group, EXEC), USER]) as stream:
        final = stream.get_final_response()
    (item,) = [o for o in final.output if o.type == "custom_tool_call"]
    assert (item.name, item.namespace) == ("exec", "functions")
    sent = gw.engine.requests[-1]["tools"]
    assert sent[0]["function"]["name"] == "functions__exec"
    assert sent[0]["function"]["parameters"]["required"] == ["input"]


def test_both_declarations_are_served_once_and_a_conflict_is_refused(gw) -> None:
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    c.responses.create(model=MODEL, input=[_additional(EXEC, PATCH), USER], tools=[EXEC])
    assert [t["function"]["name"] for t in gw.engine.requests[-1]["tools"]] == ["exec_command", "apply_patch"]
    other = {**EXEC, "description": "something else"}
    with pytest.raises(openai.BadRequestError, match="exec_command"):
        c.responses.create(model=MODEL, input=[_additional(other), USER], tools=[EXEC])


@pytest.mark.parametrize("tool", [{"type": "web_search"}, {"type": "namespace", "name": "hosted",
                                                           "tools": [{"type": "file_search", "name": "f"}]}])
def test_a_tool_kind_that_cannot_be_served_is_refused_naming_it(gw, tool: dict) -> None:
    r = gw.rollout()
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    kind = tool["type"] if tool["type"] != "namespace" else tool["tools"][0]["type"]
    with pytest.raises(openai.BadRequestError) as err:
        c.responses.create(model=MODEL, input=[_additional(EXEC, tool), USER])
    message = err.value.response.json()["error"]["message"]
    assert f"'{kind}'" in message and "input[0].tools[1]" in message
    assert err.value.response.json()["error"]["code"] == "unsupported_tool"
    (refused,) = gw.store.get_calls(r.id)
    assert refused.api == ApiKind.RESPONSES and refused.status == CallStatus.REFUSED
    assert "unsupported_tool" in (refused.error or "")


def test_additional_tools_render_through_the_chat_template_as_top_level_tools(make_gateway) -> None:
    """Token-exact mode: the prompt the policy reads is the same token for token either way."""
    pytest.importorskip("transformers")
    from harnessrl.gateway.render import RenderConfig

    gw = make_gateway(render_mode="gateway", render=RenderConfig(tokenizer="tiny"))
    prompts = []
    for kwargs in ({"input": [USER]}, {"input": [USER], "tools": [NAMESPACE, PATCH]},
                   {"input": [_additional(NAMESPACE, PATCH), USER]}):
        r = gw.rollout()
        c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
        c.responses.create(model=MODEL, max_output_tokens=2, **kwargs)
        prompts.append(gw.engine.requests[-1]["prompt"])
    bare, top, codex = prompts
    assert codex == top and top != bare
