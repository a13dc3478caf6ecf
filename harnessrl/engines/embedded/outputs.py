"""What the engine hands back: per-token deltas while generating, and the finished request.

The scheduler thread produces events; consumers read them synchronously (``RequestHandle.result``) or from an
asyncio loop (``RequestHandle.events``), so the HTTP server never blocks its loop on generation.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Admitted:
    """The request got its place: its policy version is fixed from here on."""

    policy_version: int
    prompt_token_ids: list[int]


@dataclass
class Delta:
    """New tokens of one choice (one token per decode step), with the text they completed."""

    index: int
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    text: str
    finish_reason: str | None = None  # "stop" | "length" | "abort" once finished
    #: The policy version that sampled these tokens (a generation may span a weight update).
    policy_version: int | None = None


def add_run(runs: list[list[int]], version: int | None, count: int) -> None:
    """Extend run-length ``[[version, tokens], ...]`` with ``count`` tokens of ``version``."""
    if version is None or count <= 0:
        return
    if runs and runs[-1][0] == version:
        runs[-1][1] += count
    else:
        runs.append([version, count])


@dataclass
class Failed:
    message: str
    status: int = 500


@dataclass
class Choice:
    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    #: Run-length ``[[policy version, tokens], ...]`` of who sampled each token, in order.
    versions: list[list[int]] = field(default_factory=list)


@dataclass
class RequestOutput:
    """A finished request: every choice's exact token IDs, logprobs and text, and the policy version."""

    request_id: str
    prompt_token_ids: list[int]
    policy_version: int
    choices: list[Choice]


class EngineError(RuntimeError):
    """Generation failed inside the engine (the message says why)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


Event = Admitted | Delta | Failed
_DONE = object()


class RequestHandle:
    """Consumer side of one request. Events arrive from the scheduler thread in order; ``None`` ends them."""

    def __init__(self, request_id: str, n: int, cancel: Callable[[], None]) -> None:
        self.request_id = request_id
        self.n = n
        self._cancel = cancel
        self._sync: queue.Queue[Any] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async: asyncio.Queue[Any] | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver events to ``loop`` (call before the request is submitted)."""
        self._loop, self._async = loop, asyncio.Queue()

    def _emit(self, event: Any) -> None:  # scheduler thread
        if self._loop is not None and self._async is not None:
            try:
                self._loop.call_soon_threadsafe(self._async.put_nowait, event)
            except RuntimeError:  # loop closed: the consumer is gone
                self._cancel()
        else:
            self._sync.put(event)

    def _finish(self) -> None:
        self._emit(_DONE)

    def cancel(self) -> None:
        """Stop generating for this request (e.g. the client disconnected)."""
        self._cancel()

    async def events(self) -> AsyncIterator[Event]:
        assert self._async is not None, "bind_loop() before submitting to consume events asynchronously"
        while True:
            event = await self._async.get()
            if event is _DONE:
                return
            yield event

    def result(self, timeout: float | None = None) -> RequestOutput:
        """Block until the request finishes (synchronous consumers)."""
        return collect(iter(lambda: self._sync.get(timeout=timeout), _DONE), self)

    async def aresult(self) -> RequestOutput:
        events = [event async for event in self.events()]
        return collect(iter(events), self)


def collect(events: Any, handle: RequestHandle) -> RequestOutput:
    """Fold a request's events into its final output (raises EngineError on failure)."""
    choices = [Choice(index=i) for i in range(handle.n)]
    version, prompt = -1, []
    for event in events:
        if isinstance(event, Admitted):
            version, prompt = event.policy_version, event.prompt_token_ids
        elif isinstance(event, Delta):
            c = choices[event.index]
            c.token_ids += event.token_ids
            c.logprobs += event.logprobs
            c.top_logprobs += event.top_logprobs
            c.text += event.text
            c.finish_reason = event.finish_reason or c.finish_reason
            add_run(c.versions, event.policy_version, len(event.token_ids))
        elif isinstance(event, Failed):
            raise EngineError(event.message, event.status)
    return RequestOutput(handle.request_id, prompt, version, choices)
