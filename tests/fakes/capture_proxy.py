"""A loopback reverse proxy that keeps every request it forwards (method, path, headers, JSON body)
and the status of the answer: how the CLI tests see exactly what a real harness sent, and how the
request fixtures in ``tests/fixtures/cli_requests`` were captured. Responses stream through unchanged.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import orjson

_HOP = {b"host", b"content-length", b"transfer-encoding", b"connection", b"accept-encoding"}


class CaptureProxy:
    """ASGI app forwarding to ``upstream`` (a base URL without path); ``captured`` holds the exchanges."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.captured: list[dict[str, Any]] = []
        #: seam: ``rewrite(path, body) -> body`` changes a JSON body before it is forwarded (not captured)
        self.rewrite: Any = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        query = scope.get("query_string", b"").decode()
        path = scope["path"] + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        try:
            parsed: Any = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = body.decode(errors="replace")
        entry: dict[str, Any] = {"method": scope["method"], "path": path,
                                 "headers": {k.decode(): v.decode() for k, v in headers}, "body": parsed}
        self.captured.append(entry)
        if self.rewrite is not None and isinstance(parsed, dict):
            body = orjson.dumps(self.rewrite(scope["path"], parsed))
        async with httpx.AsyncClient(timeout=600) as client:
            req = client.build_request(scope["method"], self.upstream + path, headers=headers, content=body)
            resp = await client.send(req, stream=True)
            entry["status"] = resp.status_code
            out_headers = [(k.encode(), v.encode()) for k, v in resp.headers.items()
                           if k.lower().encode() not in _HOP and k.lower() != "content-encoding"]
            await send({"type": "http.response.start", "status": resp.status_code, "headers": out_headers})
            chunks: list[bytes] = []
            async for chunk in resp.aiter_raw():
                chunks.append(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await resp.aclose()
            if resp.status_code >= 400:
                entry["response"] = b"".join(chunks).decode(errors="replace")[:4000]
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class CaptureServer:
    """Serve a ``CaptureProxy`` with uvicorn on a free loopback port in a background thread."""

    def __init__(self, upstream: str) -> None:
        import uvicorn

        self.proxy = CaptureProxy(upstream)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(self.proxy, log_level="critical", access_log=False,
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self) -> CaptureServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("capture proxy did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def sanitize(entries: list[dict[str, Any]], replace: dict[str, str]) -> list[dict[str, Any]]:
    """The exchanges with credentials removed and run-specific strings (temp paths, rollout ids) replaced,
    so they can be committed as fixtures."""
    text = orjson.dumps(entries).decode()
    for old, new in sorted(replace.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    out = orjson.loads(text)
    for e in out:
        for h in list(e["headers"]):
            if h.lower() in ("authorization", "x-api-key", "api-key"):
                e["headers"][h] = "[REDACTED]"
    return out
