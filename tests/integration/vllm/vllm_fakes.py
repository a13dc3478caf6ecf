"""A fake vLLM with the runtime LoRA API, for tests that need no real vLLM.

Wraps the shared ``FakeEngine`` (the gateway's engine dialect) and adds ``POST /v1/load_lora_adapter``
and ``/v1/unload_lora_adapter`` with vLLM's answers: 200 with a text body, 400 when the name is already
loaded or unknown. Requests naming a model that is neither the base nor a loaded adapter get 404, as
vLLM does, so a gateway that routes to the wrong name fails the test. With ``dev_mode`` (a server started
with ``VLLM_SERVER_DEV_MODE=1``) it also answers vLLM's dev routes an in-place full-weight update uses:
``GET /is_paused``, ``POST /collective_rpc`` (``reload_weights`` from a folder with a ``config.json``) and
``POST /reset_prefix_cache``; without it they are 404, as on a server started without that variable.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

_DEV_ROUTES = ("/is_paused", "/collective_rpc", "/reset_prefix_cache")


async def _read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI request."""
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


class FakeVllm:
    """ASGI app: LoRA admin endpoints here, everything else to the wrapped ``FakeEngine``."""

    def __init__(self, engine: FakeEngine | None = None) -> None:
        self.engine = engine or FakeEngine(model="base")
        self.adapters: dict[str, str] = {}  # name -> path
        self.lora_calls: list[tuple[str, dict]] = []
        self.fail_load = False
        self.dev_mode = False
        self.dev_calls: list[tuple[str, dict]] = []  # (route, body) of the dev routes, in order

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.dev_mode and scope["path"] in _DEV_ROUTES:
            return await self._dev(scope, receive, send)
        if scope["type"] == "http" and scope["path"] in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
            body = await _read_body(receive)
            data = orjson.loads(body)
            self.lora_calls.append((scope["path"].rsplit("/", 1)[-1], data))
            status, text = self._lora(scope["path"], data)
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": text.encode()})
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            return await self._check_model(scope, receive, send)
        await self.engine(scope, receive, send)

    async def _dev(self, scope: dict, receive: Any, send: Any) -> None:
        body = await _read_body(receive)
        data = orjson.loads(body) if body else {}
        route = scope["path"].lstrip("/")
        self.dev_calls.append((route, data))
        status, answer = 200, {"is_paused": False} if route == "is_paused" else {"success": True}
        if route == "collective_rpc":
            path = data.get("kwargs", {}).get("weights_path", "")
            if data.get("method") != "reload_weights" or not (Path(path) / "config.json").is_file():
                status, answer = 500, {"error": f"cannot reload weights from {path!r}"}
            else:
                answer = {"results": [None]}
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})

    def _lora(self, path: str, data: dict) -> tuple[int, str]:
        name = data.get("lora_name")
        if path.endswith("/load_lora_adapter"):
            if self.fail_load:
                return 400, "LoRA rank 64 is greater than max_lora_rank 16"
            if name in self.adapters:
                return 400, f"The lora adapter '{name}' has already been loaded."
            if not (Path(data["lora_path"]) / "adapter_config.json").is_file():
                return 400, f"No adapter found for {data['lora_path']}"
            self.adapters[name] = data["lora_path"]
            return 200, f"Success: LoRA adapter '{name}' added successfully."
        if self.adapters.pop(name, None) is None:
            return 400, f"The lora adapter '{name}' cannot be found."
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    async def _check_model(self, scope: dict, receive: Any, send: Any) -> None:
        body = await _read_body(receive)
        model = orjson.loads(body).get("model") if body else None
        if model is not None and model != self.engine.model and model not in self.adapters:
            err = orjson.dumps({"error": {"message": f"The model `{model}` does not exist.", "type":
                                          "NotFoundError", "code": 404}})
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": err})
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.engine(scope, replay, send)


def start_fake_vllm() -> tuple[EngineServer, FakeVllm]:
    app = FakeVllm()
    server = EngineServer(app.engine)
    # Serve the wrapper instead of the bare engine (EngineServer builds its uvicorn config in __init__).
    server._server.config.app = app
    return server.start(), app
