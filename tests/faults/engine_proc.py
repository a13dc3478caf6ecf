"""The fake engine as its own process, so that a test can SIGKILL or SIGSTOP it mid-stream (a real crash).

``python tests/faults/engine_proc.py --port P --token-delay 0.05``: like ``fake_engine.py`` plus the slow modes,
and two of vLLM's ways to refuse a request (``--context-window``, ``--strict-logit-bias``, ``VllmChecks``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `fakes` importable

from fakes.fake_engine import FakeEngine, render_chat  # noqa: E402

VOCAB = 262  # the fake engine's tokens: bytes and six specials


class VllmChecks:
    """vLLM's refusals in front of the fake engine. A prompt longer than ``context_window`` is refused with
    400 -- in a streamed request in-band, after the 200 (vLLM checks it in its generator, once the stream
    has begun). With ``strict_logit_bias`` a ``logit_bias`` naming a token outside the vocabulary is an HTTP
    500 (the engine indexes its logits with it), from an engine that keeps serving everything else."""

    def __init__(self, inner: Any, context_window: int | None, strict_logit_bias: bool) -> None:
        self.inner, self.window, self.strict = inner, context_window, strict_logit_bias

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.inner(scope, receive, send)
        raw, more = b"", True
        while more:
            msg = await receive()
            raw, more = raw + msg.get("body", b""), msg.get("more_body", False)
        body = _loads(raw)
        bias = body.get("logit_bias")
        bad = [k for k in bias if not (k.isdigit() and int(k) < VOCAB)] if self.strict and isinstance(bias, dict) else []
        if bad:
            return await _send(send, 500, {"error": {"message": f"index {bad[0]} is out of bounds for dimension 0 "
                                                                f"with size {VOCAB}", "type": "InternalServerError",
                                                     "code": 500}})
        if self.window:
            n = _prompt_len(body)
            if n >= self.window:
                error = {"error": {"message": f"This model's maximum context length is {self.window} tokens. However, "
                                              f"your request has {n} input tokens. Please reduce the length of the "
                                              "input messages.", "type": "BadRequestError", "code": 400}}
                if not body.get("stream"):
                    return await _send(send, 400, error)
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"text/event-stream")]})
                await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(error) + b"\n\n",
                            "more_body": True})
                return await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        replayed = False

        async def again() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        return await self.inner(scope, again, send)


def _prompt_len(body: dict) -> int:
    """Prompt tokens of a chat (the fake template) or completions (token IDs or text bytes) request."""
    if isinstance(body.get("messages"), list):
        return len(render_chat(body["messages"]))
    prompt = body.get("prompt")
    return len(prompt) if isinstance(prompt, list) else len(str(prompt or "").encode())


def _loads(raw: bytes) -> dict:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


async def _send(send: Any, status: int, obj: dict) -> None:
    data = orjson.dumps(obj)
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--completion-len", type=int, default=16)
    ap.add_argument("--token-delay", type=float, default=0.0)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--context-window", type=int, default=None)
    ap.add_argument("--strict-logit-bias", action="store_true")
    args = ap.parse_args()
    import uvicorn

    engine = FakeEngine(completion_len=args.completion_len)
    engine.token_delay_s, engine.delay_s = args.token_delay, args.delay
    app: Any = engine
    if args.context_window or args.strict_logit_bias:
        app = VllmChecks(engine, args.context_window, args.strict_logit_bias)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, backlog=4096)


if __name__ == "__main__":
    main()
