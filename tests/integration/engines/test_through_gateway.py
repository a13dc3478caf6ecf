"""The whole serving path: openai client -> recording gateway -> embedded engine (SmolLM2) -> store."""

from __future__ import annotations

import httpx
import openai
import pytest
import torch

from harnessrl.gateway import serve_in_thread
from harnessrl.store import open_store

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(params=["engine", "gateway"])
def gateway(request, smollm2_server, tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    server = serve_in_thread(
        store, [smollm2_server.base_url], admin_token="admin-secret", port=0, render_mode=request.param
    )
    yield server, store
    server.stop()
    store.close()


def test_chat_through_the_gateway_is_recorded_token_exact(gateway, smollm2, smollm2_server):
    server, store = gateway
    admin = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer admin-secret"}, timeout=30)
    r = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "input": {}})
    assert r.status_code == 201, r.text
    rollout = r.json()
    client = openai.OpenAI(
        base_url=rollout["base_url"], api_key=rollout["api_key"], max_retries=0, timeout=300
    )
    resp = client.chat.completions.create(
        model="policy", messages=QUESTION, temperature=0, max_tokens=30, logprobs=True
    )
    assert "Paris" in resp.choices[0].message.content
    (call,) = store.get_calls(rollout["rollout_id"])
    model, tokenizer = smollm2
    assert (
        tokenizer.decode(call.completion_token_ids, skip_special_tokens=True)
        == resp.choices[0].message.content
    )
    assert call.policy_version == smollm2_server.engine.version
    # the recorded behaviour logprobs are the ones a trainer recomputes (greedy: temperature 1)
    ids = call.prompt_token_ids + call.completion_token_ids
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    n = len(call.prompt_token_ids)
    ref = [lp[n - 1 + i, t].item() for i, t in enumerate(call.completion_token_ids)]
    assert max(abs(a - b) for a, b in zip(ref, call.completion_logprobs, strict=True)) < 1e-3
