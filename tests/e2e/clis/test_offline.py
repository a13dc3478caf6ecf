"""Each example's CLI, outside any sandbox, with ``HTTPS_PROXY``/``HTTP_PROXY`` pointing at a listener that
logs every connection it is asked for: with the example's offline switches the CLI completes its edit and
asks for none (the gateway is on loopback, in ``NO_PROXY``). Without the switches the same run asks for
api.anthropic.com, github.com/chatgpt.com, models.opencode.ai/registry.npmjs.org, an aliyuncs.com RUM
endpoint (Qwen Code), otel.cline.bot/data.cline.bot, api.kilo.ai (docs/harnesses.md), so a new CLI version
that phones home somewhere new fails here. (aider and OpenHands: in their own test modules.)
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from ._harness import CLIS_BIN, Stack
from ._scripts import BINARIES, SCRIPTS


@pytest.fixture
def proxy_log() -> Iterator[tuple[str, list[str]]]:
    """A loopback listener standing in for an HTTP proxy: it records each request line and closes."""
    seen: list[str] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    seen.append(conn.recv(4096).split(b"\r\n")[0].decode(errors="replace"))
                except OSError as exc:
                    seen.append(f"(no request line: {exc})")

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    server.close()


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(SCRIPTS))
def test_cli_asks_for_no_connection_but_the_gateway(example: str, stack: Stack,
                                                    proxy_log: tuple[str, list[str]]) -> None:
    if not (CLIS_BIN / BINARIES[example]).exists():
        pytest.skip(f"{BINARIES[example]} is not installed: run `bash scripts/clis.sh`")
    url, seen = proxy_log
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    fixed = 'return f"Hello, {name}!"'
    a = stack.attempt(example, SCRIPTS[example](fixed), f"{example}-offline", env=env, sandbox=False)
    assert a.rollout.exit_code == 0 and a.rewards["verifier"] == 1.0, a.logs
    assert seen == [], seen
