"""One translation module per API the harness may speak, each readable alone.

``anthropic`` (Messages), ``responses`` (Responses) and ``gemini`` (Google's generateContent) translate to
and from the internal chat request;
``chat`` and ``completions`` are the engine's own dialect (validated, then relayed). ``Encoder`` is what each translated API's event
encoder offers: chat deltas in, the API's own stream events out, and the complete answer at the end.
"""

from __future__ import annotations

from typing import Any, Protocol


class Encoder(Protocol):
    def start(self, input_tokens: int) -> bytes:
        """The opening events."""

    def feed(self, delta: dict[str, Any]) -> bytes:
        """Events for one chat delta (content, reasoning_content, tool_calls)."""

    def finish(self, finish_reason: str | None, stop_string: Any, input_tokens: int, output_tokens: int) -> bytes:
        """The closing events (held back by the gateway until the call is recorded)."""

    def result(self) -> dict[str, Any]:
        """The complete answer object."""

    def error_event(self, message: str, kind: str = ...) -> bytes:
        """An in-band error that ends the stream."""


def encode_complete(enc: Encoder, chat_resp: dict[str, Any]) -> bytes:
    """Feed a complete chat response through ``enc``; returns the whole event stream."""
    choice = (chat_resp.get("choices") or [{}])[0]
    usage = chat_resp.get("usage") or {}
    n_in, n_out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return (enc.start(n_in) + enc.feed(choice.get("message") or {})
            + enc.finish(choice.get("finish_reason"), choice.get("stop_reason"), n_in, n_out))
