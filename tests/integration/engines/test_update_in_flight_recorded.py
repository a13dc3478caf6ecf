"""A generation that spans a weight update, through the whole serving path (openai client -> recording gateway
-> embedded engine with ``on_update = "continue"``): recorded token for token, with the version that sampled
each token in ``sampling.token_versions``, and trained with each token's own behaviour logprob."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
import torch

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.gateway import serve_in_thread
from harnessrl.models import tiny_model
from harnessrl.store import open_store
from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples


@pytest.fixture
def continuing(tmp_path):
    model, tokenizer = tiny_model()
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256,
                                                           on_update="continue"))
    server = start_server(engine, owns_engine=True)
    store = open_store(f"sqlite:///{tmp_path / 'gw.db'}")
    gateway = serve_in_thread(store, [server.base_url], admin_token="admin-secret", port=0)
    yield engine, gateway, store
    gateway.stop()
    store.close()
    server.close()


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_that_spans_an_update_is_recorded_with_each_tokens_version(continuing, stream):
    engine, gateway, store = continuing
    admin = httpx.Client(base_url=gateway.url, headers={"Authorization": "Bearer admin-secret"}, timeout=30)
    rollout = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "input": {}}).json()
    client = openai.OpenAI(base_url=rollout["base_url"], api_key=rollout["api_key"], max_retries=0, timeout=120)
    body = dict(model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=150, temperature=1.0,
                seed=7, extra_body={"ignore_eos": True})
    before = engine.stats["tokens"]
    result: list = []
    t = threading.Thread(target=lambda: result.append(
        "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **body))
        if stream else client.chat.completions.create(**body).choices[0].message.content))
    t.start()
    while engine.stats["tokens"] - before < 10:  # mid-generation
        time.sleep(0.002)
    perturbed = {k: v + 0.05 * torch.randn_like(v) for k, v in engine.model.state_dict().items()}
    assert engine.update_weights(perturbed) == 1
    t.join(120)
    assert result, "the call did not finish"
    (call,) = store.get_calls(rollout["rollout_id"])
    (runs,) = call.sampling["token_versions"]
    assert [v for v, _ in runs] == [0, 1] and sum(n for _, n in runs) == len(call.completion_token_ids) == 150
    assert call.policy_version == 0  # the version it was admitted under; the tokens say the rest
    ids = call.prompt_token_ids + call.completion_token_ids
    with torch.no_grad():
        lp = torch.log_softmax(engine.model(torch.tensor([ids])).logits[0].float(), -1)
    new = [lp[len(call.prompt_token_ids) - 1 + i, tok].item() for i, tok in enumerate(call.completion_token_ids)]
    k = runs[0][1]
    assert max(abs(a - b) for a, b in zip(new[k:], call.completion_logprobs[k:], strict=True)) < 1e-4
    (sample,) = build_samples([call], "g", SampleConfig(), rollout_id=call.rollout_id).samples
    start, end = sample.call_spans[0]
    assert sample.behaviour_logprobs[start:end] == pytest.approx(call.completion_logprobs, abs=1e-6)
