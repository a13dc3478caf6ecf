"""Publishing a (deliberately perturbed) LoRA to a serving SmolLM2 engine over HTTP, mid-request."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest
import torch
from peft import LoraConfig, get_peft_model

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, start_server
from harnessrl.models import load_model

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def perturbed_adapter(tmp_path_factory, smollm2):
    model, _ = load_model("smollm2")  # a trainer-side copy
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"])
    policy = get_peft_model(model, config)
    torch.manual_seed(0)
    with torch.no_grad():  # deliberately large, so greedy text changes, not just logprobs
        for name, p in policy.named_parameters():
            if "lora_" in name:
                p.normal_(0.0, 0.1)
    folder = tmp_path_factory.mktemp("adapter")
    policy.save_pretrained(str(folder))
    return folder


@pytest.fixture
def fresh_server(smollm2):
    model, tokenizer = load_model("smollm2")  # its own weights: the LoRA must not leak into other tests
    server = start_server(EmbeddedEngine(model, tokenizer, EngineConfig(model="smollm2")), owns_engine=True)
    yield server
    server.close()


def test_lora_update_changes_outputs_and_spares_the_request_in_flight(fresh_server, perturbed_adapter):
    client = openai.OpenAI(base_url=fresh_server.base_url, api_key="x", max_retries=0, timeout=300)
    body = dict(
        model="smollm2",
        messages=QUESTION,
        temperature=0,
        max_tokens=16,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    before = client.chat.completions.create(**body)
    assert before.model_extra["policy_version"] == 0

    stream_ids, stream_versions, started = [], set(), threading.Event()

    def stream() -> None:
        for chunk in client.chat.completions.create(stream=True, **body):
            stream_versions.add(chunk.model_extra["policy_version"])
            for ch in chunk.choices:
                ids = (ch.model_extra or {}).get("token_ids") or []
                stream_ids.extend(ids)
                if ids:
                    started.set()

    t = threading.Thread(target=stream)
    t.start()
    assert started.wait(120)
    r = httpx.post(
        f"{fresh_server.url}/harnessrl/update_weights",
        json={"lora_path": str(perturbed_adapter)},
        timeout=300,
    )
    t.join(300)
    assert r.status_code == 200 and r.json() == {"policy_version": 1}
    # the update waited for the stream, which ran entirely on the old weights
    assert stream_versions == {0}
    assert stream_ids == before.choices[0].model_extra["token_ids"]

    after = client.chat.completions.create(**body)
    assert after.model_extra["policy_version"] == 1
    assert after.choices[0].model_extra["token_ids"] != before.choices[0].model_extra["token_ids"]
    assert httpx.get(f"{fresh_server.url}/harnessrl/version").json()["policy_version"] == 1
