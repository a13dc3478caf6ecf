"""SmolLM2-135M-Instruct served by the embedded engine, spoken to with the real ``openai`` client."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
import torch

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)


def test_capital_of_france_greedy_with_exact_tokens(smollm2_server, smollm2):
    _, tokenizer = smollm2
    resp = client(smollm2_server).chat.completions.create(
        model="smollm2",
        messages=QUESTION,
        temperature=0,
        max_tokens=40,
        logprobs=True,
        extra_body={"return_token_ids": True},
    )
    extra = resp.model_extra or {}
    choice = resp.choices[0]
    assert "Paris" in choice.message.content
    assert choice.finish_reason == "stop"
    token_ids = choice.model_extra["token_ids"]
    assert token_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")  # EOS is a sampled token too
    assert tokenizer.decode(token_ids, skip_special_tokens=True) == choice.message.content
    rendered = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    assert extra["prompt_token_ids"] == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert extra["policy_version"] == smollm2_server.engine.version
    assert len(choice.logprobs.content) == len(token_ids)
    assert resp.usage.completion_tokens == len(token_ids)


def test_sampled_logprobs_match_a_forward_pass(smollm2_server, smollm2):
    model, _ = smollm2
    resp = client(smollm2_server).chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Write a haiku about the sea."}],
        temperature=0.8,
        max_tokens=24,
        seed=1,
        logprobs=True,
        n=2,
        extra_body={"return_token_ids": True},
    )
    prompt = resp.model_extra["prompt_token_ids"]
    for choice in resp.choices:
        ids = choice.model_extra["token_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0].float()
        lp = torch.log_softmax(logits / 0.8, -1)
        ref = [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(ids)]
        got = [e.logprob for e in choice.logprobs.content]
        assert max(abs(a - b) for a, b in zip(ref, got, strict=True)) < 1e-3


def test_streaming_adds_up_to_the_same_answer(smollm2_server, smollm2):
    _, tokenizer = smollm2
    c = client(smollm2_server)
    body = dict(
        model="smollm2",
        messages=QUESTION,
        temperature=0,
        max_tokens=30,
        extra_body={"return_token_ids": True},
    )
    whole = c.chat.completions.create(**body)
    text, ids, versions, prompt = "", [], set(), None
    for chunk in c.chat.completions.create(stream=True, **body):
        versions.add(chunk.model_extra["policy_version"])
        prompt = prompt or chunk.model_extra.get("prompt_token_ids")
        for ch in chunk.choices:
            text += ch.delta.content or ""
            ids += (ch.model_extra or {}).get("token_ids") or []
    assert text == whole.choices[0].message.content
    assert ids == whole.choices[0].model_extra["token_ids"]
    assert prompt == whole.model_extra["prompt_token_ids"]
    assert versions == {whole.model_extra["policy_version"]}


def test_completions_accept_token_ids(smollm2_server, smollm2):
    _, tokenizer = smollm2
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = client(smollm2_server)
    by_ids = c.completions.create(
        model="smollm2",
        prompt=ids,
        max_tokens=12,
        temperature=0,
        logprobs=0,
        extra_body={"return_token_ids": True},
    )
    by_text = c.completions.create(model="smollm2", prompt=prompt, max_tokens=12, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text and "Paris" in by_ids.choices[0].text
    assert by_ids.choices[0].model_extra["prompt_token_ids"] == ids
    assert len(by_ids.choices[0].logprobs.token_logprobs) == len(by_ids.choices[0].model_extra["token_ids"])


def _throughput(server, n: int, max_tokens: int = 24) -> float:
    c = client(server)
    done: list[int] = []

    def one(i: int) -> None:
        r = c.completions.create(
            model="smollm2",
            prompt=f"Story {i}: Once upon a time",
            max_tokens=max_tokens,
            temperature=1.0,
            seed=i,
            extra_body={"ignore_eos": True},
        )
        done.append(r.usage.completion_tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(done) == n * max_tokens
    return sum(done) / (time.perf_counter() - t0)


def test_eight_concurrent_requests_are_batched(smollm2_server):
    # Other processes share these cores, so measure single/concurrent alternately and compare the best of each.
    single, batched = [], []
    for _ in range(2):
        single.append(_throughput(smollm2_server, 1))
        batched.append(_throughput(smollm2_server, 8))
        if max(batched) >= 2 * max(single):
            break
    assert max(batched) >= 2 * max(single), f"single {single} tok/s, 8 concurrent {batched} tok/s"
    assert smollm2_server.engine.stats["max_batch_seen"] >= 4


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_non_positive_max_tokens_is_a_400(smollm2_server, max_tokens):
    with pytest.raises(openai.BadRequestError) as info:
        client(smollm2_server).chat.completions.create(
            model="smollm2", messages=QUESTION, max_tokens=max_tokens
        )
    assert "max_tokens" in info.value.message


def test_over_long_prompt_is_a_clear_400(smollm2_server):
    long = [{"role": "user", "content": "word " * 9000}]
    with pytest.raises(openai.BadRequestError) as info:
        client(smollm2_server).chat.completions.create(model="smollm2", messages=long, max_tokens=10)
    assert "maximum context length is 8192 tokens" in info.value.message
    assert info.value.code == "context_length_exceeded"
    # the engine keeps serving
    health = httpx.get(f"{smollm2_server.url}/health")
    assert health.status_code == 200
