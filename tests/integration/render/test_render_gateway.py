"""Token-exact multi-turn tool use through the real gateway and the real ``openai`` client.

The engine is the gateway's fake vLLM server with a scripted ``generate``: it returns SmolLM2 token IDs
chosen by the test (tool calls, a non-canonically tokenized answer, a completion without its stop token),
so we can check that every prompt the engine received starts with exactly the previous prompt + the tokens
it sampled, and that the store recorded the same tokens and fidelity.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import openai
import pytest

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))  # `fakes`
sys.path.insert(0, str(TESTS / "unit" / "render"))  # the cached SmolLM2 tokenizer

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402
from render_tokenizers import load_smollm2_tokenizer  # noqa: E402

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.gateway.render import create_renderer  # noqa: E402
from harnessrl.store import open_store  # noqa: E402
from harnessrl.types import Fidelity  # noqa: E402

IM_END = 2
TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run a shell command",
                                      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
]


class ScriptedEngine(FakeEngine):
    """Samples the next scripted completion, whatever the prompt; remembers every prompt it was given."""

    def __init__(self, script: list[tuple[list[int], str]]) -> None:
        super().__init__(model="smollm2")
        self.script = list(script)
        self.prompts: list[list[int]] = []

    def generate(self, prompt, body, index):
        self.prompts.append(list(prompt))
        ids, finish = self.script.pop(0)
        return ids, finish, None


def tool_call(tok, cmd: str, stop: bool = True) -> list[int]:
    text = "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"cmd": cmd}}) + "\n</tool_call>"
    return tok.encode(text, add_special_tokens=False) + ([IM_END] if stop else [])


@pytest.fixture(scope="module")
def tok():
    return load_smollm2_tokenizer()


@pytest.fixture
def stack(tmp_path, tok):
    """(gateway server, store, engine) -> a function making a rollout client."""
    started = []

    def make(script):
        engine = ScriptedEngine(script)
        engine_server = EngineServer(engine).start()
        store = open_store(f"sqlite:///{tmp_path / 'render.db'}")
        config = GatewayConfig(port=0, engines=[engine_server.url], admin_token="admin", render_mode="gateway",
                               health_interval_s=0.2)
        server = GatewayServer(Gateway(store, config, renderer=create_renderer(tokenizer=tok))).start()
        started.append((server, engine_server, store))
        r = httpx.post(f"{server.url}/admin/rollouts", headers={"Authorization": "Bearer admin"},
                       json={"task_id": "t1", "group_id": "g1", "input": {}})
        assert r.status_code == 201, r.text
        rollout = r.json()
        client = openai.OpenAI(base_url=rollout["base_url"], api_key=rollout["api_key"], max_retries=0)
        return client, rollout["rollout_id"], store, engine

    yield make
    for server, engine_server, store in started:
        server.stop()
        engine_server.stop()
        store.close()


def test_multi_turn_tool_conversation_is_token_exact_through_the_gateway(stack, tok):
    noncanonical = (tok.encode("Both files are listed:", add_special_tokens=False)
                    + tok.convert_tokens_to_ids(["Ġ", "a", ".", "t", "x", "t"]) + [IM_END])
    two_calls = (tok.encode("First, two commands.\n", add_special_tokens=False) + tool_call(tok, "pwd", stop=False)
                 + tok.encode("\n", add_special_tokens=False) + tool_call(tok, "whoami"))
    script = [
        (tool_call(tok, "ls"), "stop"),
        (noncanonical, "stop"),
        (tool_call(tok, "cat a.txt", stop=False), "stop"),  # this engine strips the stop token
        (two_calls, "stop"),
        (tok.encode("Done: you are root in /work.", add_special_tokens=False) + [IM_END], "stop"),
        (tok.encode("Bye!", add_special_tokens=False) + [IM_END], "stop"),
    ]
    client, rollout_id, store, engine = stack(script)
    messages = [{"role": "system", "content": "You are a shell agent."},
                {"role": "user", "content": "What files are here?"}]
    results = {"ls": "a.txt", "cat a.txt": "hello", "pwd": "/work", "whoami": "root"}
    finishes = []
    for turn in range(6):
        resp = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, max_tokens=64)
        choice = resp.choices[0]
        finishes.append(choice.finish_reason)
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in choice.message.tool_calls or []:
            cmd = json.loads(call.function.arguments)["cmd"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": results[cmd]})
        if turn in (1, 4):
            messages.append({"role": "user", "content": "Next?" if turn == 1 else "Thanks."})

    assert finishes == ["tool_calls", "stop", "tool_calls", "tool_calls", "stop", "stop"]
    assert messages[4]["content"] == "Both files are listed: a.txt"
    assert [c["function"]["name"] for c in messages[8]["tool_calls"]] == ["bash", "bash"]
    calls = store.get_calls(rollout_id)
    assert len(calls) == 6
    assert [c.prompt_token_ids for c in calls] == engine.prompts  # recorded = what the engine saw
    assert calls[0].fidelity == Fidelity.RERENDERED
    for previous, call in zip(calls, calls[1:], strict=False):
        expected = previous.prompt_token_ids + previous.completion_token_ids
        assert call.prompt_token_ids[: len(expected)] == expected
        assert call.fidelity == Fidelity.EXTENDED
    # The non-canonical answer survives: naive re-tokenization of the history would have changed it.
    assert calls[2].prompt_token_ids[len(calls[1].prompt_token_ids):][: len(noncanonical)] == noncanonical
    # The completion that lacked its stop token was closed with it, and the store says so.
    assert "did not sample" in calls[3].fidelity_reason
