"""Fuzzing every harness route: no input makes the gateway answer >= 500 or drop the connection.

Valid requests of each API (including the shapes the coding CLIs send) are mutated -- a field anywhere
replaced by a value of another type, a field removed, the whole body replaced, bad bytes, bodies nested
too deep, bodies over the size limit -- and sent over real HTTP. A failure prints the seed and the body.
"""

from __future__ import annotations

import copy
import json
import os
import random
from typing import Any

import httpx
import pytest

from harnessrl.gateway import GatewayLimits

TOOLS_CHAT = [{"type": "function", "function": {"name": "bash", "description": "run",
                                                "parameters": {"type": "object", "properties": {}}}}]
SEEDS: dict[str, list[dict[str, Any]]] = {
    "/v1/chat/completions": [
        {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
         "max_tokens": 8, "temperature": 0.5, "stop": ["\n"], "logprobs": True, "top_logprobs": 2},
        {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "tools": TOOLS_CHAT,
         "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "ok"}], "n": 2},
    ],
    "/v1/completions": [{"model": "m", "prompt": "hello", "max_tokens": 5, "logprobs": 1},
                        {"prompt": [1, 2, 3], "stream": True, "max_tokens": 4, "echo": False}],
    "/v1/messages": [
        {"model": "claude", "max_tokens": 64000, "stream": True,
         "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                      {"role": "assistant", "content": [
                          {"type": "thinking", "thinking": "t", "signature": "s"},
                          {"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": "ls"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                    "content": [{"type": "text", "text": "a.txt"}]}]},
                      {"role": "system", "content": "reminder"}],
         "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}},
                   {"type": "web_search_20250305", "name": "web_search"}],
         "tool_choice": {"type": "auto"}, "thinking": {"type": "adaptive"}, "stop_sequences": ["x"]},
        {"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], "top_k": 5},
    ],
    "/v1/messages/count_tokens": [{"model": "claude", "messages": [{"role": "user", "content": "hi"}],
                                   "system": "s", "tools": [{"name": "a", "input_schema": {}}]}],
    "/v1/responses": [
        {"model": "m", "instructions": "i", "stream": True, "store": False,
         "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
                   {"type": "function_call", "call_id": "c", "name": "read", "namespace": "fs", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c", "output": "x"},
                   {"type": "reasoning", "summary": []}],
         "tools": [{"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read",
                                                                  "parameters": {"type": "object"}}]},
                   {"type": "web_search"}, {"type": "custom", "name": "apply_patch", "format": {"type": "text"}}],
         "reasoning": {"effort": "low"}, "include": [], "parallel_tool_calls": True, "tool_choice": "auto"},
        {"model": "m", "input": "hi", "max_output_tokens": 8, "previous_response_id": None},
    ],
    "/reward": [{"value": 1.0, "name": "r", "call_index": 0}],
}
GEMINI_CONVERSATION = {
    "systemInstruction": {"role": "user", "parts": [{"text": "s"}]},
    "contents": [{"role": "user", "parts": [{"text": "hi"}, {"text": "there"}]},
                 {"role": "model", "parts": [{"text": "t", "thought": True},
                                             {"functionCall": {"name": "run", "args": {"c": "ls"}, "id": "f1"},
                                              "thoughtSignature": "c2ln"}]},
                 {"role": "user", "parts": [{"functionResponse": {"name": "run", "id": "f1",
                                                                  "response": {"output": "a.txt"}}}]}],
    "tools": [{"functionDeclarations": [
        {"name": "run", "description": "run", "parameters": {"type": "OBJECT", "properties": {
            "c": {"type": "STRING", "nullable": True}}, "required": ["c"]}},
        {"name": "read", "parametersJsonSchema": {"type": "object", "properties": {"p": {"type": "string"}}}}]},
        {"googleSearch": {}}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["run"]}},
    "generationConfig": {"temperature": 0.5, "topP": 0.9, "topK": 4, "maxOutputTokens": 8, "stopSequences": ["x"],
                         "candidateCount": 1, "seed": 3, "responseMimeType": "application/json",
                         "responseJsonSchema": {"type": "object"}, "thinkingConfig": {"includeThoughts": True}},
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
}
SEEDS.update({  # Google's Gemini API: both versions, SSE and the JSON array, snake_case names
    "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse": [GEMINI_CONVERSATION],
    "/v1/models/gemini-2.5-flash:streamGenerateContent": [GEMINI_CONVERSATION],
    "/v1beta/models/gemini-2.5-flash:generateContent": [
        {"contents": [{"parts": [{"text": "hi"}]}], "system_instruction": {"parts": [{"text": "s"}]},
         "generation_config": {"max_output_tokens": 8, "response_mime_type": "application/json",
                               "response_schema": {"type": "OBJECT", "properties": {"a": {"type": "ARRAY",
                                                                                          "items": {"type": "STRING"}}}}}},
        GEMINI_CONVERSATION],
    "/v1beta/models/gemini-2.5-flash:countTokens": [
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"generateContentRequest": {"model": "models/gemini-2.5-flash", **GEMINI_CONVERSATION}}],
})
WEIRD: list[Any] = [None, 0, -1, 1.5, 2**70, -(2**70), "", "x", [], [1], ["a"], {}, {"a": 1}, True, False,
                    [None], [[]], [{}], {"type": 5}, {"type": "text"}, "\u0000", "\ud7ff" * 3, 1e308]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _set(body: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return body


def _mutate(rng: random.Random, seed: dict) -> bytes:
    kind = rng.random()
    if kind < 0.06:
        return rng.choice([b"{", b"\xff\xfe{}", b'{"model": "\xc3\x28"}', b"null", b"[" * 5000 + b"]" * 5000,
                           bytes(rng.getrandbits(8) for _ in range(64)), b""])
    if kind < 0.10:
        return json.dumps(rng.choice(WEIRD)).encode()
    body = copy.deepcopy(seed)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(body)[1:]
        if not paths:
            break
        path = rng.choice(paths)
        if rng.random() < 0.25:
            body = _set(body, path, None, delete=True)
        else:
            body = _set(body, path, copy.deepcopy(rng.choice(WEIRD)))
    return json.dumps(body).encode()


@pytest.mark.parametrize("mode", ["engine", "gateway"])
@pytest.mark.parametrize("seed", [int(os.environ.get("HARNESSRL_FUZZ_SEED", "12"))])
def test_fuzz_every_harness_route(make_gateway, seed, mode):
    extra: dict[str, Any] = {}
    if mode == "gateway":  # token-exact render mode: the renderer sees every mutated conversation
        pytest.importorskip("transformers")
        from harnessrl.gateway.render import RenderConfig

        extra = {"render_mode": "gateway", "render": RenderConfig(tokenizer="tiny")}
    gw = make_gateway(limits=GatewayLimits(max_body_bytes=64 * 1024, max_tokens_per_call=64), **extra)
    rng = random.Random(seed)
    failures: list[str] = []
    with httpx.Client(timeout=30) as http:
        rollouts = [gw.rollout(task_id=f"fuzz{i}") for i in range(4)]
        n = 0
        for path, seeds in SEEDS.items():
            for _ in range(int(os.environ.get("HARNESSRL_FUZZ_PER_ROUTE", "70"))):
                r = rollouts[n % len(rollouts)]
                n += 1
                data = _mutate(rng, rng.choice(seeds))
                url = f"{gw.url}/r/{r.id}{path}"
                try:
                    resp = http.post(url, content=data, headers={"Authorization": f"Bearer {r.api_key}",
                                                                 "content-type": "application/json"})
                except httpx.TransportError as exc:
                    failures.append(f"{path}: dropped ({exc!r}) body={data[:300]!r}")
                    continue
                if resp.status_code >= 500:
                    failures.append(f"{path}: {resp.status_code} {resp.text[:200]} body={data[:300]!r}")
            for method in ("GET", "POST"):  # models and the wrong method
                for models in ("/v1/models", "/v1beta/models", "/v1beta/models/g", "/v1/models/g:x"):
                    resp = http.request(method, f"{gw.url}/r/{rollouts[0].id}{models}",
                                        headers={"Authorization": f"Bearer {rollouts[0].api_key}"})
                    assert resp.status_code < 500
        # odd headers: keys that open nothing, odd bytes, wrong content types, huge beta lists
        odd = [{"Authorization": "Bearer"}, {"Authorization": ""}, {"Authorization": "Basic abc"},
               {"x-api-key": b"\xe9\xff"}, {"Authorization": f"Bearer {rollouts[0].api_key}",
                                          "anthropic-beta": "x," * 2000, "content-type": "text/plain"},
               {"Authorization": b"Bearer \xff\xfe"}]
        for headers in odd:
            for path in SEEDS:
                try:
                    resp = http.post(f"{gw.url}/r/{rollouts[0].id}{path}", json=SEEDS[path][0], headers=headers)
                except httpx.TransportError as exc:
                    failures.append(f"{path}: dropped ({exc!r}) headers={headers!r}"[:300])
                    continue
                if resp.status_code >= 500:
                    failures.append(f"{path}: {resp.status_code} {resp.text[:200]} headers={headers!r}"[:300])
        # over the size limit: a 413 (the connection may close after it; that is allowed)
        try:
            big = http.post(f"{gw.url}/r/{rollouts[0].id}/v1/messages", content=b"{" + b" " * 200_000 + b"}",
                            headers={"Authorization": f"Bearer {rollouts[0].api_key}"})
            assert big.status_code == 413
        except httpx.TransportError:
            pass
        # and the gateway still serves
        ok = http.post(f"{gw.url}/r/{rollouts[1].id}/v1/chat/completions",
                       json=SEEDS["/v1/chat/completions"][0], headers={"Authorization": f"Bearer {rollouts[1].api_key}"})
        assert ok.status_code == 200, ok.text
    assert not failures, f"seed {seed}: {len(failures)} failures:\n" + "\n".join(failures[:20])
