"""Response envelopes and the SSE streams of the embedded engine's HTTP API (engine events -> chunks).

Every chunk carries ``policy_version``; with ``return_token_ids`` the first chunk carries
``prompt_token_ids`` and every token chunk its ``token_ids``, so a recording proxy can rebuild the exact
sequence from the stream alone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

import harnessrl.engines.embedded.protocol as P  # the module, not the package: its __init__ imports this one
from harnessrl.engines.embedded.engine import EmbeddedEngine
from harnessrl.engines.embedded.outputs import Admitted, Delta, Failed, RequestHandle


def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class Ctx:
    """Per-request response settings shared by the streaming and non-streaming paths."""

    def __init__(self, body: dict[str, Any], engine: EmbeddedEngine, prefix: str) -> None:
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = P.now()
        self.model = body.get("model") or engine.model_name
        self.token_ids = bool(body.get("return_token_ids"))
        self.logprobs = bool(body.get("logprobs"))
        self.usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def envelope(self, obj: str, version: int, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "policy_version": version,
        }


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def result(handle: RequestHandle) -> Any:
    try:
        return await handle.aresult()
    except asyncio.CancelledError:
        handle.cancel()
        raise


async def guard(handle: RequestHandle, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Cancel generation when the client goes away mid-stream."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        handle.cancel()


async def chat_stream(handle: RequestHandle, ctx: Ctx, tok: P.TokenText) -> AsyncIterator[bytes]:
    version, prompt_len, completion = -1, 0, 0
    async for ev in handle.events():
        if isinstance(ev, Admitted):
            version, prompt_len = ev.policy_version, len(ev.prompt_token_ids)
            for i in range(handle.n):
                first = ctx.envelope(
                    "chat.completion.chunk",
                    version,
                    [
                        {
                            "index": i,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ],
                )
                if ctx.token_ids and i == 0:
                    first["prompt_token_ids"] = ev.prompt_token_ids
                yield _sse(first)
        elif isinstance(ev, Delta):
            completion += len(ev.token_ids)
            choice: dict[str, Any] = {
                "index": ev.index,
                "delta": {"content": ev.text},
                "logprobs": tok.chat_logprobs(ev) if ctx.logprobs else None,
                "finish_reason": ev.finish_reason,
            }
            if ctx.token_ids:
                choice["token_ids"] = ev.token_ids
                choice["token_versions"] = [[ev.policy_version, len(ev.token_ids)]]
            yield _sse(ctx.envelope("chat.completion.chunk", version, [choice]))
        elif isinstance(ev, Failed):
            yield _sse(P.error_body(ev.message, type_="server_error"))
    if ctx.usage:
        last = ctx.envelope("chat.completion.chunk", version, [])
        last["usage"] = usage(prompt_len, completion)
        yield _sse(last)
    yield b"data: [DONE]\n\n"


async def completion_stream(handle: RequestHandle, ctx: Ctx, tok: P.TokenText) -> AsyncIterator[bytes]:
    version, prompt, completion = -1, [], 0
    offsets = [0] * handle.n
    started: set[int] = set()
    async for ev in handle.events():
        if isinstance(ev, Admitted):
            version, prompt = ev.policy_version, ev.prompt_token_ids
        elif isinstance(ev, Delta):
            completion += len(ev.token_ids)
            choice: dict[str, Any] = {
                "index": ev.index,
                "text": ev.text,
                "logprobs": tok.completion_logprobs(ev, offsets[ev.index]) if ctx.logprobs else None,
                "finish_reason": ev.finish_reason,
                "stop_reason": None,
            }
            offsets[ev.index] += sum(len(tok.text(t)) for t in ev.token_ids)
            if ctx.token_ids:
                if ev.index not in started:
                    choice["prompt_token_ids"] = prompt
                choice["token_ids"] = ev.token_ids
                choice["token_versions"] = [[ev.policy_version, len(ev.token_ids)]]
            started.add(ev.index)
            yield _sse(ctx.envelope("text_completion", version, [choice]))
        elif isinstance(ev, Failed):
            yield _sse(P.error_body(ev.message, type_="server_error"))
    if ctx.usage:
        last = ctx.envelope("text_completion", version, [])
        last["usage"] = usage(len(prompt), completion)
        yield _sse(last)
    yield b"data: [DONE]\n\n"
