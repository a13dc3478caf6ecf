"""HTTP front of the embedded engine (Starlette), speaking the engine dialect the gateway forwards to.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (streaming or not), ``GET /v1/models``,
``GET /health``; harnessrl extras: ``policy_version`` on every response and chunk, ``GET /harnessrl/version``,
``POST /harnessrl/update_weights`` and vLLM's ``POST /v1/load_lora_adapter``/``unload_lora_adapter`` (a named
adapter served beside the engine's own model, as vLLM does). ``start_server`` runs it on a
loopback ephemeral port in a background thread (the gateway's ``--engine embedded``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import harnessrl.engines.embedded.protocol as P  # the module, not the package: its __init__ imports this one
from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded.engine import BASE, EmbeddedEngine, EngineBusyError
from harnessrl.engines.embedded.outputs import Delta, EngineError, RequestHandle
from harnessrl.engines.embedded.sampling import InvalidRequestError
from harnessrl.engines.embedded.streams import Ctx, chat_stream, completion_stream, guard, result, usage

logger = logging.getLogger(__name__)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def _errors(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except InvalidRequestError as exc:
            return _json(P.error_body(str(exc), code=exc.code, param=exc.param), 400)
        except EngineBusyError as exc:
            return _json(P.error_body(str(exc), type_="server_busy", code="busy"), 503)
        except EngineError as exc:
            return _json(P.error_body(str(exc), type_="server_error"), exc.status)
        except (ValueError, FileNotFoundError) as exc:  # bad weight-update requests
            return _json(P.error_body(str(exc)), 400)
        except Exception as exc:  # the client still gets the OpenAI error shape
            logger.exception("engine request failed")
            return _json(P.error_body(f"internal error: {exc}", type_="server_error"), 500)

    return wrapped


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("request body must be a JSON object")
    return body


def build_app(engine: EmbeddedEngine) -> Starlette:
    tok = P.TokenText(engine.tokenizer)

    def submit(prompt: list[int], params: Any, body: dict[str, Any]) -> RequestHandle:
        # Several policies: a request naming a registered adapter (or the base) is served by it, as vLLM
        # serves a loaded LoRA by its name; any other model name is the engine's model as before.
        model = body.get("model")
        adapter = model if isinstance(model, str) and (model in engine.adapters or model == BASE) else None
        return engine.submit(prompt, params, loop=asyncio.get_running_loop(), adapter=adapter)

    @_errors
    async def chat(request: Request) -> Response:
        body = await _body(request)
        params = P.sampling_params(body, chat=True)
        prompt = P.render_chat(engine.tokenizer, body)
        handle = submit(prompt, params, body)
        ctx = Ctx(body, engine, "chatcmpl")
        if body.get("stream"):
            return StreamingResponse(
                guard(handle, chat_stream(handle, ctx, tok)), media_type="text/event-stream"
            )
        out = await result(handle)
        choices = []
        for c in out.choices:
            delta = Delta(c.index, c.token_ids, c.logprobs, c.top_logprobs, c.text, c.finish_reason)
            choice: dict[str, Any] = {
                "index": c.index,
                "message": {"role": "assistant", "content": c.text, "tool_calls": []},
                "logprobs": tok.chat_logprobs(delta) if ctx.logprobs else None,
                "finish_reason": c.finish_reason,
                "stop_reason": None,
            }
            if ctx.token_ids:
                choice["token_ids"] = c.token_ids
                choice["token_versions"] = c.versions
            choices.append(choice)
        resp = ctx.envelope("chat.completion", out.policy_version, choices)
        resp["usage"] = usage(len(out.prompt_token_ids), sum(len(c.token_ids) for c in out.choices))
        if ctx.token_ids:
            resp["prompt_token_ids"] = out.prompt_token_ids
        return _json(resp)

    @_errors
    async def completions(request: Request) -> Response:
        body = await _body(request)
        params = P.sampling_params(body, chat=False)
        prompts = P.completion_prompts(engine.tokenizer, body)
        ctx = Ctx(body, engine, "cmpl")
        ctx.logprobs = body.get("logprobs") is not None
        if body.get("stream"):
            if len(prompts) != 1:
                raise InvalidRequestError("streaming supports one prompt per request", param="prompt")
            handle = submit(prompts[0], params, body)
            return StreamingResponse(
                guard(handle, completion_stream(handle, ctx, tok)), media_type="text/event-stream"
            )
        handles = [submit(p, params, body) for p in prompts]
        outs = await asyncio.gather(*(result(h) for h in handles))
        choices, completion_tokens = [], 0
        for k, out in enumerate(outs):
            for c in out.choices:
                delta = Delta(c.index, c.token_ids, c.logprobs, c.top_logprobs, c.text, c.finish_reason)
                choice: dict[str, Any] = {
                    "index": k * params.n + c.index,
                    "text": c.text,
                    "logprobs": tok.completion_logprobs(delta, 0) if ctx.logprobs else None,
                    "finish_reason": c.finish_reason,
                    "stop_reason": None,
                }
                if ctx.token_ids:
                    choice["prompt_token_ids"] = out.prompt_token_ids
                    choice["token_ids"] = c.token_ids
                    choice["token_versions"] = c.versions
                if len(outs) > 1:
                    choice["policy_version"] = out.policy_version
                choices.append(choice)
                completion_tokens += len(c.token_ids)
        resp = ctx.envelope("text_completion", min(o.policy_version for o in outs), choices)
        resp["usage"] = usage(sum(len(o.prompt_token_ids) for o in outs), completion_tokens)
        return _json(resp)

    async def models(request: Request) -> Response:
        card = {
            "id": engine.model_name,
            "object": "model",
            "created": P.now(),
            "owned_by": "harnessrl",
            "root": engine.model_name,
            "max_model_len": engine.context_window,
            "policy_version": engine.version,
        }
        return _json({"object": "list", "data": [card]})

    async def health(request: Request) -> Response:
        return _json({"status": "ok", "policy_version": engine.version})

    async def version(request: Request) -> Response:
        return _json({"policy_version": engine.version, "model": engine.model_name, "stats": engine.stats})

    @_errors
    async def update_weights(request: Request) -> Response:
        body = await _body(request)
        state_dict = None
        if body.get("path"):
            from safetensors.torch import load_file

            state_dict = await run_in_threadpool(_load_folder_weights, body["path"], load_file)
        v = await run_in_threadpool(
            engine.update_weights, state_dict, lora=body.get("lora_path"), version=body.get("version")
        )
        return _json({"policy_version": v})

    @_errors
    async def load_lora_adapter(request: Request) -> Response:
        """As vLLM: the adapter is served under ``lora_name`` beside the engine's own model (a request
        naming it gets it). Extra ``version``: the policy version its answers carry (default: 1 more than
        the name's last load). Without ``lora_name`` the engine's own model is replaced, as before."""
        body = await _body(request)
        if not body.get("lora_path"):
            raise InvalidRequestError("lora_path is required", param="lora_path")
        name = body.get("lora_name")
        if name is not None and (not isinstance(name, str) or not name or name == BASE or name.startswith("_")):
            raise InvalidRequestError(f"lora_name {name!r} is invalid (reserved or empty)", param="lora_name")
        v = await run_in_threadpool(
            engine.update_weights, lora=body["lora_path"], version=body.get("version"), adapter=name
        )
        return Response(
            f"Success: LoRA adapter '{name or 'adapter'}' added successfully (policy version {v}).",
            media_type="text/plain",
        )

    @_errors
    async def unload_lora_adapter(request: Request) -> Response:
        body = await _body(request)
        name = body.get("lora_name")
        if name not in engine.adapters:
            return _json(P.error_body(f"The lora adapter '{name}' cannot be found.", code=404), 404)
        await run_in_threadpool(engine.drop_adapter, name)
        return Response(f"Success: LoRA adapter '{name}' removed successfully.", media_type="text/plain")

    async def not_found(request: Request, exc: Exception) -> Response:
        return _json(P.error_body(f"no route {request.method} {request.url.path}", code=404), 404)

    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/harnessrl/version", version, methods=["GET"]),
        Route("/harnessrl/update_weights", update_weights, methods=["POST"]),
        Route("/v1/load_lora_adapter", load_lora_adapter, methods=["POST"]),
        Route("/v1/unload_lora_adapter", unload_lora_adapter, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found})


def _load_folder_weights(path: str, load_file: Any) -> dict[str, Any]:
    from pathlib import Path

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {path}")
    weights: dict[str, Any] = {}
    for f in files:
        weights.update(load_file(str(f)))
    return weights


class EngineServer:
    """A running engine HTTP server; ``base_url`` ends in ``/v1``. ``close()`` stops it (and owned engine)."""

    def __init__(
        self,
        engine: EmbeddedEngine,
        server: uvicorn.Server,
        thread: threading.Thread,
        host: str,
        port: int,
        owns_engine: bool,
    ) -> None:
        self.engine, self._server, self._thread = engine, server, thread
        self.host, self.port, self._owns_engine = host, port, owns_engine
        self.url = f"http://{host}:{port}"
        self.base_url = f"{self.url}/v1"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._owns_engine:
            self.engine.close()

    def __enter__(self) -> EngineServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_server(
    engine: EmbeddedEngine,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    owns_engine: bool = False,
    timeout: float = 30.0,
) -> EngineServer:
    """Serve ``engine`` from a background thread; ``port=0`` picks a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(engine), log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="harnessrl-engine-http", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the embedded engine's HTTP server did not start")
        time.sleep(0.01)
    logger.info("embedded engine serving %s at http://%s:%d/v1", engine.model_name, host, port)
    return EngineServer(engine, server, thread, host, port, owns_engine)


def start_embedded(
    config: EngineConfig | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    engine: EmbeddedEngine | None = None,
) -> EngineServer:
    """Load the configured model into an engine (unless given one) and serve it; returns the server."""
    owns = engine is None
    engine = engine or EmbeddedEngine.from_config(config)
    return start_server(engine, host, port, owns_engine=owns)
