"""A small real HTTP engine that speaks vLLM's OpenAI dialect with deterministic token ids.

Tokens are bytes (0-255) plus a few specials, and the chat template is concatenative, so a follow-up
prompt extends the previous prompt+completion token for token -- like a real template. Completions are
derived from a hash of the prompt: same request, same tokens. Fault-injection seams (a test flips them
on the ``FakeEngine`` object): ``fail_next`` statuses, ``break_stream_after`` chunks, ``delay_s`` /
``token_delay_s`` slow modes, ``unhealthy``, ``policy_version``.

Run standalone (benchmarks): ``python tests/fakes/fake_engine.py --port 8100``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import socket
import threading
import time
import zlib
from typing import Any

import orjson

END, TOOLCALL = 256, 261
ROLES = {"system": 257, "user": 258, "assistant": 259, "tool": 260, "developer": 257}
_ALPHABET = b"abcdefghijklmnopqrstuvwxyz     "


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def tool_call_tokens(name: str, arguments: str) -> list[int]:
    return [TOOLCALL, *orjson.dumps({"name": name, "arguments": arguments})]


def render_chat(messages: list[dict]) -> list[int]:
    """The fake chat template: [role] content-bytes [tool calls] [END] ..., then the assistant header."""
    ids: list[int] = []
    for m in messages:
        ids.append(ROLES.get(m.get("role", "user"), 258))
        ids.extend(_text(m.get("content")).encode())
        for tc in m.get("tool_calls") or ():
            fn = tc.get("function") or {}
            ids.extend(tool_call_tokens(fn.get("name", ""), fn.get("arguments", "")))
        ids.append(END)
    ids.append(ROLES["assistant"])
    return ids


def logprob_of(tid: int) -> float:
    return -0.01 * (1 + tid % 50)


def token_text(tid: int) -> str:
    return chr(tid) if tid < 256 else ""


class FakeEngine:
    def __init__(self, completion_len: int = 16, model: str = "fake-model",
                 policy_version: int | None = None) -> None:
        self.completion_len = completion_len
        self.model = model
        self.policy_version = policy_version
        self.fail_next: list[int] = []
        self.break_stream_after: int | None = None
        self.delay_s = 0.0
        self.token_delay_s = 0.0
        self.unhealthy = False
        self.requests: collections.deque[dict] = collections.deque(maxlen=2000)
        self.count = 0

    # -- generation -----------------------------------------------------------------------------------
    def render(self, messages: list[dict]) -> list[int]:
        """The prompt's token ids (a subclass may render more compactly)."""
        return render_chat(messages)

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        """(token ids, finish_reason, tool call or None) for one choice."""
        seed = zlib.crc32(bytes(t & 0xFF for t in prompt[-512:])) + 7919 * index + len(prompt)
        tools = body.get("tools")
        msgs = body.get("messages") or []
        if tools and msgs and msgs[-1].get("role") != "tool":
            name = tools[0].get("function", {}).get("name", "tool")
            args = orjson.dumps({"n": seed % 100}).decode()
            call = {"id": f"call_{seed % 10**8}", "type": "function", "function": {"name": name, "arguments": args}}
            return [*tool_call_tokens(name, args), END], "tool_calls", call
        max_tokens = body.get("max_tokens") or 1 << 30
        ids = [_ALPHABET[(seed * (i + 1) * 2654435761 >> 7) % len(_ALPHABET)] for i in range(self.completion_len)]
        ids.append(END)
        if max_tokens < len(ids):
            return ids[:max_tokens], "length", None
        return ids, "stop", None

    def _choices(self, prompt: list[int], body: dict) -> list[tuple[list[int], str, dict | None]]:
        return [self.generate(prompt, body, i) for i in range(body.get("n") or 1)]

    # -- ASGI -----------------------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path, method = scope["path"], scope["method"]
        if method == "GET":
            if path == "/health":
                return await _json(send, {} if not self.unhealthy else {"error": "down"},
                                   503 if self.unhealthy else 200)
            if path == "/v1/models":
                card = {"id": self.model, "object": "model"}
                window = getattr(self, "window", None)  # vLLM lists its context as max_model_len
                return await _json(send, {"object": "list", "data": [card | ({"max_model_len": window} if window
                                                                             else {})]})
            return await _json(send, _err("not found", 404), 404)
        body_bytes = b""
        while True:
            msg = await receive()
            body_bytes += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        self.count += 1
        try:
            body = orjson.loads(body_bytes)
        except orjson.JSONDecodeError:
            return await _json(send, _err("bad json", 400), 400)
        self.requests.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_next:
            status = self.fail_next.pop(0)
            return await _json(send, _err(f"injected failure {status}", status), status)
        if path == "/v1/chat/completions":
            if not isinstance(body.get("messages"), list):
                return await _json(send, _err("messages required", 400), 400)
            prompt = self.render(body["messages"])
            chat = True
        elif path == "/v1/completions":
            p = body.get("prompt")
            prompt = list(p) if isinstance(p, list) else list(str(p).encode())
            chat = False
        else:
            return await _json(send, _err("not found", 404), 404)
        choices = self._choices(prompt, body)
        if body.get("stream"):
            return await self._stream(send, body, prompt, choices, chat)
        return await _json(send, self._response(body, prompt, choices, chat))

    def _response(self, body: dict, prompt: list[int], choices: list, chat: bool) -> dict:
        out_choices = []
        for i, (ids, finish, call) in enumerate(choices):
            text = "".join(token_text(t) for t in ids if t < 256 and call is None)
            if chat:
                msg: dict[str, Any] = {"role": "assistant", "content": None if call else text}
                if call:
                    msg["tool_calls"] = [call]
                lp = {"content": [{"token": token_text(t), "logprob": logprob_of(t), "bytes": [t & 0xFF],
                                   "top_logprobs": []} for t in ids]} if body.get("logprobs") else None
                out_choices.append({"index": i, "message": msg, "logprobs": lp, "finish_reason": finish,
                                    "stop_reason": None, "token_ids": ids})
            else:
                lp = None
                if body.get("logprobs") is not None:
                    lp = {"tokens": [token_text(t) for t in ids], "token_logprobs": [logprob_of(t) for t in ids],
                          "top_logprobs": None, "text_offset": list(range(len(ids)))}
                out_choices.append({"index": i, "text": text, "logprobs": lp, "finish_reason": finish,
                                    "stop_reason": None, "prompt_token_ids": prompt, "token_ids": ids})
        n_out = sum(len(c[0]) for c in choices)
        out = {"id": f"{'chatcmpl' if chat else 'cmpl'}-fake-{self.count}",
               "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
               "model": self.model, "choices": out_choices,
               "usage": {"prompt_tokens": len(prompt), "completion_tokens": n_out,
                         "total_tokens": len(prompt) + n_out}}
        if chat:
            out["prompt_token_ids"] = prompt
        if self.policy_version is not None:
            out["policy_version"] = self.policy_version
        return out

    async def _stream(self, send: Any, body: dict, prompt: list[int], choices: list, chat: bool) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        base: dict[str, Any] = {"id": f"fake-stream-{self.count}", "created": int(time.time()),
                                "model": self.model,
                                "object": "chat.completion.chunk" if chat else "text_completion"}
        if self.policy_version is not None:
            base["policy_version"] = self.policy_version
        chunks: list[dict] = []
        for i, (ids, finish, call) in enumerate(choices):
            if chat:
                first = {**base, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""},
                                              "logprobs": None, "finish_reason": None}]}
                if i == 0:
                    first["prompt_token_ids"] = prompt
                chunks.append(first)
            parts = [ids[: len(ids) // 2], ids[len(ids) // 2:]] if call else [[t] for t in ids]
            for k, part in enumerate(parts):
                last = k == len(parts) - 1
                lp_c = [{"token": token_text(t), "logprob": logprob_of(t), "bytes": [t & 0xFF],
                         "top_logprobs": []} for t in part]
                if chat:
                    if call:
                        fn = {"name": call["function"]["name"], "arguments": ""} if k == 0 else \
                            {"arguments": call["function"]["arguments"]}
                        tc = {"index": 0, "function": fn}
                        if k == 0:
                            tc.update(id=call["id"], type="function")
                        delta: dict[str, Any] = {"tool_calls": [tc]}
                    else:
                        delta = {"content": "".join(token_text(t) for t in part)}
                    ch = {"index": i, "delta": delta, "logprobs": {"content": lp_c} if body.get("logprobs") else None,
                          "finish_reason": finish if last else None, "token_ids": part}
                else:
                    lp = None
                    if body.get("logprobs") is not None:
                        lp = {"tokens": [token_text(t) for t in part],
                              "token_logprobs": [logprob_of(t) for t in part], "top_logprobs": None,
                              "text_offset": [0] * len(part)}
                    ch = {"index": i, "text": "".join(token_text(t) for t in part), "logprobs": lp,
                          "finish_reason": finish if last else None, "token_ids": part}
                    if k == 0:
                        ch["prompt_token_ids"] = prompt
                chunks.append({**base, "choices": [ch]})
        if (body.get("stream_options") or {}).get("include_usage"):
            n_out = sum(len(c[0]) for c in choices)
            chunks.append({**base, "choices": [], "usage": {"prompt_tokens": len(prompt),
                                                             "completion_tokens": n_out,
                                                             "total_tokens": len(prompt) + n_out}})
        for k, chunk in enumerate(chunks):
            if self.break_stream_after is not None and k >= self.break_stream_after:
                self.break_stream_after = None
                raise ConnectionAbortedError("injected: stream broken")
            await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(chunk) + b"\n\n",
                        "more_body": True})
            if self.token_delay_s:
                await asyncio.sleep(self.token_delay_s)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def _err(message: str, status: int) -> dict:
    return {"error": {"message": message, "type": "fake_engine_error", "code": status}}


async def _json(send: Any, obj: Any, status: int = 200) -> None:
    data = orjson.dumps(obj)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


class EngineServer:
    """Serve a ``FakeEngine`` with uvicorn in a background thread; ``url`` ends in ``/v1``."""

    def __init__(self, engine: FakeEngine | None = None, port: int = 0) -> None:
        import uvicorn

        self.engine = engine or FakeEngine()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self.engine, log_level="critical", access_log=False,
                                                     lifespan="off", backlog=4096))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self) -> EngineServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake engine did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--completion-len", type=int, default=16)
    ap.add_argument("--policy-version", type=int, default=None)
    args = ap.parse_args()
    import uvicorn

    engine = FakeEngine(completion_len=args.completion_len, policy_version=args.policy_version)
    uvicorn.run(engine, host=args.host, port=args.port, log_level="warning", access_log=False, backlog=4096)


if __name__ == "__main__":
    main()
