"""``UpstreamResponse.read``: the whole body, whether it came with the headers or in pieces afterwards.

A short answer arrives in one read, before ``read`` is called (its fast path, no async generator); a long or
slow one arrives in pieces while ``read`` waits. A real TCP server on loopback sends each way."""

from __future__ import annotations

import asyncio

import pytest

from harnessrl.gateway.upstream import UpstreamClient

BODY = b'{"id": "x", "text": "' + b"0123456789" * 3000 + b'"}'


async def _serve(pieces: list[bytes], pause_s: float) -> tuple[asyncio.AbstractServer, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for i, piece in enumerate(pieces):
            if i:
                await asyncio.sleep(pause_s)
            writer.write(piece)
            await writer.drain()
        await reader.read()  # keep-alive: the client closes
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _head(length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n".encode()


def _chunked(body: bytes, size: int) -> list[bytes]:
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return [b"%x\r\n" % len(p) + p + b"\r\n" for p in parts] + [b"0\r\n\r\n"]


@pytest.mark.parametrize("pieces", [
    pytest.param([_head(len(BODY)) + BODY], id="with-the-headers"),
    pytest.param([_head(len(BODY)), BODY[:7], BODY[7:20000], BODY[20000:]], id="in-pieces-after"),
    pytest.param([_head(None), *_chunked(BODY, 4096)], id="chunked-in-pieces"),
])
def test_read_returns_the_whole_body(pieces: list[bytes]) -> None:
    async def main() -> None:
        server, port = await _serve(pieces, pause_s=0.05)
        client = UpstreamClient(timeout_s=10)
        try:
            resp = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", b"{}")
            if len(pieces) == 1:
                await asyncio.sleep(0.05)  # the whole answer is in before read() is called
                assert resp._complete
            assert resp.status == 200
            assert await resp.read() == BODY
            assert await resp.read() == b""  # read once: nothing left over
            resp.release()
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
