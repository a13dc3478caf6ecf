"""A fake SGLang server: the answers of SGLang's HTTP server that harnessrl's SGLang probe reads.

This is a test seam, not SGLang. Its shapes follow SGLang's own source (``python/sglang/srt/entrypoints/
http_server.py`` and ``openai/protocol.py`` / ``serving_completions.py``, sgl-project/sglang), which
differ from vLLM's where it matters to a client:

- ``GET /health``: 200 with an empty body (503 while the server starts);
- ``GET /get_model_info``: ``model_path``, ``tokenizer_path``, ``is_generation``,
  ``preferred_sampling_params``, ``weight_version``;
- ``GET /v1/models``: model cards ``owned_by: "sglang"`` with ``root`` and ``max_model_len``;
- ``POST /v1/completions``: only ``application/json`` bodies; a prompt may be token ids; a choice carries
  ``matched_stop`` and, only when the request set ``return_token_ids``, ``token_ids`` and
  ``prompt_token_ids`` (absent otherwise, not null); the response has ``metadata.weight_version``.
  Errors are SGLang's flat ``{"object": "error", "message", "type", "param", "code"}`` with status 400,
  not OpenAI's nested ``{"error": {...}}``;
- ``POST /update_weights_from_disk``: ``{"success", "message", "num_paused_requests"}``, 400 on failure.

``token_ids=False`` plays a release whose ``CompletionRequest`` has no ``return_token_ids`` field: SGLang's
pydantic models ignore unknown fields, so the request succeeds and the ids are simply not there.
Tokens are deterministic: completion token ``i`` is ``(sum(prompt) + 7 * i) % 251 + 3``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer  # noqa: E402


class FakeSglang:
    """ASGI app answering like ``python -m sglang.launch_server --model-path <model_path>``."""

    def __init__(self, model_path: str = "Qwen/Qwen2.5-0.5B-Instruct", *, served_model_name: str | None = None,
                 token_ids: bool = True, context_len: int = 32768) -> None:
        self.model_path = model_path
        self.served_model_name = served_model_name or model_path  # SGLang's default: the model path
        self.token_ids = token_ids
        self.context_len = context_len
        self.starting = False
        self.weight_version = "default"
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, parsed JSON body or None)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            data = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            data = None
        self.requests.append((method, path, data))
        if method == "GET" and path in ("/health", "/health_generate"):
            return await _send(send, 503 if self.starting else 200, b"", "text/plain")
        if method == "GET" and path == "/get_model_info":
            return await _json(send, {"model_path": self.model_path, "tokenizer_path": self.model_path,
                                      "is_generation": True, "preferred_sampling_params": None,
                                      "weight_version": self.weight_version})
        if method == "GET" and path == "/v1/models":
            card = {"id": self.served_model_name, "object": "model", "created": int(time.time()),
                    "owned_by": "sglang", "root": self.served_model_name, "parent": None,
                    "max_model_len": self.context_len}
            return await _json(send, {"object": "list", "data": [card]})
        if method == "POST" and path == "/v1/completions":
            if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                return await _error(send, "Unsupported Media Type: Only 'application/json' is allowed")
            return await self._completions(send, data)
        if method == "POST" and path == "/update_weights_from_disk":
            if not isinstance(data, dict) or not data.get("model_path"):
                return await _json(send, {"success": False, "message": "model_path is required",
                                          "num_paused_requests": 0}, 400)
            message = "Succeeded to update model weights."
            if data.get("weight_version") is not None:
                self.weight_version = str(data["weight_version"])
                message += f" Weight version updated to {self.weight_version}."
            return await _json(send, {"success": True, "message": message, "num_paused_requests": 0})
        return await _json(send, {"detail": "Not Found"}, 404)  # FastAPI's answer for an unknown route

    async def _completions(self, send: Any, data: Any) -> None:
        if not isinstance(data, dict) or "prompt" not in data:
            return await _error(send, "1 validation error for CompletionRequest prompt: Field required")
        prompt = data["prompt"]
        max_tokens = data.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            return await _error(send, "1 validation error for CompletionRequest max_tokens: "
                                      "Value error, max_tokens must be positive")
        if not prompt:
            return await _error(send, "Prompt cannot be empty")
        prompt_ids = list(prompt) if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt) \
            else list(str(prompt).encode())
        out = [(sum(prompt_ids) + 7 * i) % 251 + 3 for i in range(max_tokens)]
        choice: dict[str, Any] = {"index": 0, "text": "".join(chr(97 + t % 26) for t in out), "logprobs": None,
                                  "finish_reason": "length", "matched_stop": None}
        if data.get("logprobs") is not None:
            lps = [-0.05 * (1 + t % 7) for t in out]
            choice["logprobs"] = {"text_offset": list(range(len(out))), "token_logprobs": lps,
                                  "tokens": [chr(97 + t % 26) for t in out], "top_logprobs": [None] * len(out)}
        if self.token_ids and data.get("return_token_ids"):
            choice["token_ids"] = out
            choice["prompt_token_ids"] = prompt_ids
        usage = {"prompt_tokens": len(prompt_ids), "total_tokens": len(prompt_ids) + len(out),
                 "completion_tokens": len(out), "prompt_tokens_details": None, "reasoning_tokens": 0}
        await _json(send, {"id": f"{len(self.requests):032x}", "object": "text_completion",
                           "created": int(time.time()), "model": data.get("model", "default"),
                           "choices": [choice], "usage": usage,
                           "metadata": {"weight_version": self.weight_version}})


async def _send(send: Any, status: int, body: bytes, media_type: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", media_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Any, obj: Any, status: int = 200) -> None:
    await _send(send, status, orjson.dumps(obj), "application/json")


async def _error(send: Any, message: str) -> None:
    """SGLang's validation error: HTTP 400 with a flat ErrorResponse (not OpenAI's nested ``error``)."""
    await _json(send, {"object": "error", "message": message, "type": "Bad Request", "param": None,
                       "code": 400}, 400)


def start_fake_sglang(**kwargs: Any) -> tuple[EngineServer, FakeSglang]:
    """Serve a ``FakeSglang`` on loopback; the server's ``url`` ends in ``/v1`` like an attach URL."""
    app = FakeSglang(**kwargs)
    server = EngineServer()
    server._server.config.app = app  # EngineServer builds its uvicorn config in __init__
    return server.start(), app
