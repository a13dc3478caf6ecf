"""The engine's HTTP dialect, checked quickly on the tiny random model with the real openai client."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "user", "content": "list the files"}]


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60)


def test_chat_renders_tools_with_the_template_and_returns_n_choices(tiny_server):
    tokenizer = tiny_server.engine.tokenizer
    resp = client(tiny_server).chat.completions.create(
        model="anything",
        messages=MESSAGES,
        tools=TOOLS,
        n=2,
        max_tokens=6,
        seed=1,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    rendered = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    assert resp.model_extra["prompt_token_ids"] == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert resp.model == "anything" and resp.model_extra["policy_version"] == 0
    assert [c.index for c in resp.choices] == [0, 1]
    for c in resp.choices:
        assert len(c.model_extra["token_ids"]) == 6 and c.finish_reason == "length"
        assert tokenizer.decode(c.model_extra["token_ids"], skip_special_tokens=True) == c.message.content
    assert resp.usage.completion_tokens == 12


def test_fields_not_asked_for_are_not_returned(tiny_server):
    resp = client(tiny_server).chat.completions.create(model="m", messages=MESSAGES, max_tokens=3)
    assert "prompt_token_ids" not in resp.model_extra and resp.choices[0].logprobs is None
    assert "token_ids" not in (resp.choices[0].model_extra or {})


def test_stream_chunks_carry_ids_logprobs_version_and_usage(tiny_server):
    chunks = list(
        client(tiny_server).chat.completions.create(
            model="m",
            messages=MESSAGES,
            max_tokens=5,
            stream=True,
            logprobs=True,
            top_logprobs=2,
            stream_options={"include_usage": True},
            extra_body={"return_token_ids": True, "ignore_eos": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].model_extra["prompt_token_ids"]
    token_chunks = [c for c in chunks if c.choices and (c.choices[0].model_extra or {}).get("token_ids")]
    assert len(token_chunks) == 5
    for c in token_chunks:
        (entry,) = c.choices[0].logprobs.content
        assert len(entry.top_logprobs) == 2 and entry.logprob <= 0
    assert chunks[-1].usage.completion_tokens == 5 and chunks[-1].choices == []
    assert all("policy_version" in c.model_extra for c in chunks)


def test_completions_with_several_prompts_and_raw_sse(tiny_server):
    c = client(tiny_server)
    resp = c.completions.create(
        model="m",
        prompt=[[5, 6, 7], [8, 9]],
        n=2,
        max_tokens=4,
        logprobs=1,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    assert [ch.index for ch in resp.choices] == [0, 1, 2, 3]
    assert [ch.model_extra["prompt_token_ids"] for ch in resp.choices] == [[5, 6, 7]] * 2 + [[8, 9]] * 2
    assert all(len(ch.logprobs.token_logprobs) == 4 for ch in resp.choices)

    with httpx.stream(
        "POST",
        f"{tiny_server.base_url}/completions",
        timeout=30,
        json={
            "model": "m",
            "prompt": "hello",
            "max_tokens": 3,
            "stream": True,
            "return_token_ids": True,
            "logprobs": 0,
            "ignore_eos": True,
        },
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[len("data: ") :]) for line in lines[:-1]]
    assert events[0]["choices"][0]["prompt_token_ids"]
    assert sum(len(e["choices"][0]["token_ids"]) for e in events) == 3


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        ({"max_tokens": 0}, 400, "max_tokens"),
        ({"max_tokens": -1}, 400, "max_tokens"),
        ({"max_tokens": 300}, 400, "maximum context length is 256"),
        ({"messages": [{"role": "user", "content": "hello " * 400}]}, 400, "maximum context length"),
        ({"messages": []}, 400, "messages"),
        ({"temperature": -1}, 400, "temperature"),
        ({"n": 0}, 400, "n must be"),
    ],
)
def test_bad_requests_get_openai_shaped_400s(tiny_server, body, status, fragment):
    full = {"model": "m", "messages": MESSAGES, **body}
    r = httpx.post(f"{tiny_server.base_url}/chat/completions", json=full, timeout=30)
    assert r.status_code == status
    err = r.json()["error"]
    assert fragment in err["message"] and err["type"] == "invalid_request_error"


def test_not_json_and_unknown_routes(tiny_server):
    r = httpx.post(f"{tiny_server.base_url}/chat/completions", content=b"{nope", timeout=10)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    assert httpx.get(f"{tiny_server.base_url}/nothing", timeout=10).status_code == 404


def test_models_and_health(tiny_server):
    models = httpx.get(f"{tiny_server.base_url}/models", timeout=10).json()
    assert models["data"][0]["id"] == "tiny" and models["data"][0]["max_model_len"] == 256
    assert httpx.get(f"{tiny_server.url}/health", timeout=10).status_code == 200
