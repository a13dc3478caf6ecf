"""A minimal keep-alive HTTP/1.1 client for the engine hop (asyncio protocol + httptools parser).

Why not aiohttp/httpx: on these machines the upstream client was the largest single cost of a proxied
call (measured per request: httpx ~1.5-2 ms CPU, httpcore ~1-1.3 ms, aiohttp ~0.35-0.45 ms). The gateway
only ever POSTs JSON to a few known engines on a trusted network, so a client that does exactly that --
pooled connections, Content-Length requests, chunked or sized responses, streaming bodies -- is small.

The timeout is one of progress, not of total time: a loaded engine that keeps sending bytes, or answers its
health check when asked after ``timeout_s`` without a byte (``stall_check``), is slow, not dead, and keeps
the request. Only an engine that also fails that check times out.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

import httptools

#: Parsed (method, URL)s kept: engine URLs and their paths, a handful; cleared past this (URLs from outside).
MAX_TARGETS = 256


class UpstreamClosed(ConnectionError):
    """The engine closed the connection before the response was complete."""


class _Conn(asyncio.Protocol):
    def __init__(self, pool: _HostPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.resp: UpstreamResponse | None = None
        self.closed = False
        self.used = False

    # -- asyncio protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.resp is None:  # unsolicited bytes: the connection is unusable
            self._close()
            return
        self.resp._got_bytes = True
        self.resp._progress_at = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.resp._fail(UpstreamClosed(f"invalid HTTP response from the engine: {exc}"))
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.resp is not None and not self.resp._complete:
            self.resp._fail(UpstreamClosed(f"the engine closed the connection: {exc or 'EOF'}"))

    def pause_writing(self) -> None:  # request bodies are small; nothing to throttle
        pass

    # -- httptools callbacks --------------------------------------------------------------------------
    def on_headers_complete(self) -> None:
        assert self.resp is not None
        self.resp.status = self.parser.get_status_code()
        if not self.resp._headers.done():
            self.resp._headers.set_result(None)

    def on_body(self, body: bytes) -> None:
        assert self.resp is not None
        self.resp._push(body)

    def on_message_complete(self) -> None:
        assert self.resp is not None
        self.resp._keep_alive = self.parser.should_keep_alive()
        self.resp._finish()

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class UpstreamResponse:
    """One engine response: ``status``, then ``read()`` or ``async for chunk in iter_chunks()``."""

    def __init__(self, conn: _Conn, timeout_s: float = 600.0,
                 stall_check: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.status = 0
        self._conn = conn
        self._timeout_s = timeout_s
        self._stall_check = stall_check
        self._progress_at = time.monotonic()
        self._headers: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._complete = False
        self._keep_alive = False
        self._error: BaseException | None = None
        self._got_bytes = False
        self._released = False
        self._timer: asyncio.TimerHandle | None = None
        self._checking: asyncio.Future[None] | None = None

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._timeout)

    def _timeout(self) -> None:
        """No byte for ``timeout_s``: ask whether the engine lives (it may be decoding a long answer)."""
        if self._complete or self._released or self._error is not None:
            return
        idle = time.monotonic() - self._progress_at
        if idle < self._timeout_s:  # progress since the timer was set: wait the rest
            self._arm(self._timeout_s - idle)
        elif self._stall_check is None:
            self._timed_out(f"the engine sent nothing for {idle:.0f}s (upstream timeout)")
        else:
            self._checking = asyncio.ensure_future(self._check_stall(idle))

    async def _check_stall(self, idle: float) -> None:
        assert self._stall_check is not None
        alive = await self._stall_check()
        if self._complete or self._released or self._error is not None:
            return
        if alive:  # slow, not dead: keep waiting
            self._progress_at = time.monotonic()
            self._arm(self._timeout_s)
        else:
            self._timed_out(f"the engine sent nothing for {idle:.0f}s and did not answer its health check")

    def _timed_out(self, why: str) -> None:
        self._fail(TimeoutError(why))
        self._conn._close()

    def _push(self, body: bytes) -> None:
        self._chunks.append(body)
        self._wake()

    def _finish(self) -> None:
        self._complete = True
        if self._timer is not None:
            self._timer.cancel()
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        if not self._headers.done():
            self._headers.set_exception(exc)
            self._headers.exception()
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives: whatever came since the last step, in one piece."""
        chunks = self._chunks
        while True:
            while chunks:
                if len(chunks) == 1:
                    yield chunks.popleft()
                else:
                    data = b"".join(chunks)
                    chunks.clear()
                    yield data
            if self._complete:
                return
            if self._error is not None:
                raise self._error
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup

    async def read(self) -> bytes:
        if self._complete:  # the whole body came already (a short answer: one read): no async generator
            data = b"".join(self._chunks)
            self._chunks.clear()
            return data
        parts = [chunk async for chunk in self.iter_chunks()]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def release(self) -> None:
        """Give the connection back to the pool (or close it when the response was not consumed)."""
        if self._released:
            return
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
        conn = self._conn
        conn.resp = None
        conn.pool.active.discard(conn)
        if self._complete and self._keep_alive and not conn.closed:
            conn.pool.idle.append(conn)
        else:
            conn._close()


class _HostPool:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[_Conn] = []
        self.active: set[_Conn] = set()  # connections with a request in flight (``abort``)

    async def connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: _Conn(self), self.host, self.port)
        return conn


class UpstreamClient:
    """Pooled keep-alive connections per engine host; ``post(url, body)`` -> ``UpstreamResponse``."""

    def __init__(self, timeout_s: float = 600.0, connect_timeout_s: float = 5.0) -> None:
        self._pools: dict[tuple[str, int], _HostPool] = {}
        self._targets: dict[tuple[str, str], tuple[_HostPool, bytes]] = {}
        self._timeout = timeout_s
        self._connect_timeout = connect_timeout_s

    async def request(self, method: str, url: str, body: bytes = b"",
                      content_type: bytes = b"application/json",
                      timeout_s: float | None = None,
                      stall_check: Callable[[], Awaitable[bool]] | None = None) -> UpstreamResponse:
        """Send a request; returns once the response headers arrived (the body is read from it).

        ``timeout_s`` without a byte of the answer fails it, unless ``stall_check`` (asked then) says the
        engine lives: then it waits again."""
        timeout = self._timeout if timeout_s is None else timeout_s
        target = self._targets.get((method, url))
        if target is None:
            target = self._target(method, url)
        pool, start = target
        head = start + b"Content-Length: %d\r\nAccept: */*\r\n" % len(body)
        if body:
            head += b"Content-Type: " + content_type + b"\r\n"
        payload = head + b"\r\n" + body
        while pool.idle:  # a reused connection may have been closed by the engine meanwhile
            conn = pool.idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            resp = self._send(conn, payload, timeout, stall_check)
            try:
                await resp._headers
                return resp
            except UpstreamClosed:
                if resp._got_bytes:
                    raise
                # closed before answering: the request was not processed; try another connection
        conn = await asyncio.wait_for(pool.connect(), self._connect_timeout)
        resp = self._send(conn, payload, timeout, stall_check)
        await resp._headers
        return resp

    def _target(self, method: str, url: str) -> tuple[_HostPool, bytes]:
        """The pool and the request line + Host header of ``method url``: parsed once per URL (the gateway
        posts to a few engine URLs, every call)."""
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"engine URL {url!r}: only http:// is supported on the engine hop")
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        pool = self._pools.get((host, port))
        if pool is None:
            pool = self._pools[(host, port)] = _HostPool(host, port)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if len(self._targets) >= MAX_TARGETS:  # URLs from outside (an admin's engine list): stay bounded
            self._targets.clear()
        start = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n".encode()
        target = self._targets[(method, url)] = (pool, start)
        return target

    async def post(self, url: str, body: bytes,
                   stall_check: Callable[[], Awaitable[bool]] | None = None) -> UpstreamResponse:
        return await self.request("POST", url, body, stall_check=stall_check)

    async def get(self, url: str, timeout_s: float | None = None) -> UpstreamResponse:
        return await self.request("GET", url, timeout_s=timeout_s)

    @staticmethod
    def _send(conn: _Conn, payload: bytes, timeout: float,
              stall_check: Callable[[], Awaitable[bool]] | None = None) -> UpstreamResponse:
        resp = UpstreamResponse(conn, timeout, stall_check)
        resp._arm(timeout)
        conn.pool.active.add(conn)
        conn.resp = resp
        conn.used = True
        conn.parser = httptools.HttpResponseParser(conn)
        assert conn.transport is not None
        conn.transport.write(payload)
        return resp

    def abort(self, url: str, why: str) -> int:
        """Fail every request in flight to ``url``'s host (its engine is dead); returns how many."""
        parts = urlsplit(url)
        pool = self._pools.get((parts.hostname or "127.0.0.1", parts.port or 80))
        if pool is None:
            return 0
        aborted = 0
        for conn in list(pool.active):
            if conn.resp is not None and not conn.resp._complete:
                conn.resp._fail(UpstreamClosed(why))
                aborted += 1
            conn._close()
        for conn in pool.idle:
            conn._close()
        pool.idle.clear()
        return aborted

    async def close(self) -> None:
        for pool in self._pools.values():
            for conn in pool.idle:
                conn._close()
            pool.idle.clear()
