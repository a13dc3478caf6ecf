"""Streaming (SSE): parse the engine's events and accumulate the complete call while forwarding chunks.

The harness gets each chunk as it comes; the accumulator keeps every choice's token ids, logprobs, text
and tool-call deltas so that the recorded call is the same as for a non-streamed request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from harnessrl.gateway.dialect import choice_logprobs
from harnessrl.gateway.upstream import UpstreamResponse
from harnessrl.types import ApiKind, ChoiceTokens


async def sse_batches(resp: UpstreamResponse) -> AsyncIterator[list[bytes]]:
    """The ``data:`` payloads of an SSE stream (multi-line data joined; comments and other fields skipped),
    in batches: the events that arrived together, so that they reach the harness in one write."""
    buf = b""
    async for chunk in resp.iter_chunks():
        buf += chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        batch, pos = [], 0
        while (end := buf.find(b"\n\n", pos)) >= 0:
            event, pos = buf[pos:end], end + 2
            data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                batch.append(data[0] if len(data) == 1 else b"\n".join(data))
        buf = buf[pos:]
        if batch:
            yield batch


def merge_runs(runs: list[list[int]], more: Any) -> None:
    """Append run-length ``[[version, tokens], ...]`` to ``runs`` (a run continuing the last one merges)."""
    for version, count in more:
        if runs and runs[-1][0] == version:
            runs[-1][1] += count
        else:
            runs.append([int(version), int(count)])


class _Choice:
    __slots__ = ("token_ids", "logprobs", "text", "role", "tool_calls", "finish_reason", "prompt_ids",
                 "stop_reason", "versions")

    def __init__(self) -> None:
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.text: list[str] = []
        self.role = "assistant"
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.prompt_ids: list[int] | None = None
        self.stop_reason: Any = None
        self.versions: list[list[int]] = []  # run-length [[policy version, tokens], ...] (embedded engine)


class StreamAccumulator:
    def __init__(self, api: ApiKind) -> None:
        self.api = api
        self.prompt_token_ids: list[int] | None = None
        self.policy_version: int | None = None
        self.meta: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None
        self._choices: dict[int, _Choice] = {}

    def add(self, chunk: dict[str, Any]) -> None:
        if self.prompt_token_ids is None and chunk.get("prompt_token_ids") is not None:
            self.prompt_token_ids = list(chunk["prompt_token_ids"])
        if chunk.get("policy_version") is not None:
            self.policy_version = int(chunk["policy_version"])
        if not self.meta:
            self.meta = {k: chunk.get(k) for k in ("id", "created", "model", "system_fingerprint")}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for ch in chunk.get("choices") or ():
            c = self._choices.get(ch.get("index", 0))
            if c is None:
                c = self._choices[ch.get("index", 0)] = _Choice()
            if ch.get("token_ids"):
                c.token_ids.extend(ch["token_ids"])
            if ch.get("token_versions"):
                merge_runs(c.versions, ch["token_versions"])
            if ch.get("logprobs"):
                c.logprobs.extend(choice_logprobs(self.api, ch["logprobs"]))
            if c.prompt_ids is None and ch.get("prompt_token_ids") is not None:
                c.prompt_ids = list(ch["prompt_token_ids"])
            if ch.get("finish_reason") is not None:
                c.finish_reason = ch["finish_reason"]
                c.stop_reason = ch.get("stop_reason")
            if self.api == ApiKind.CHAT:
                self._add_delta(c, ch.get("delta") or {})
            elif ch.get("text"):
                c.text.append(ch["text"])

    @staticmethod
    def _add_delta(c: _Choice, delta: dict[str, Any]) -> None:
        if delta.get("role"):
            c.role = delta["role"]
        if delta.get("content"):
            c.text.append(delta["content"])
        for tc in delta.get("tool_calls") or ():
            slot = c.tool_calls.setdefault(tc.get("index", 0), {"id": None, "type": "function",
                                                                "function": {"name": "", "arguments": ""}})
            if tc.get("id"):
                slot["id"] = tc["id"]
            if tc.get("type"):
                slot["type"] = tc["type"]
            fn = tc.get("function") or {}
            if fn.get("name"):
                slot["function"]["name"] += fn["name"]
            if fn.get("arguments"):
                slot["function"]["arguments"] += fn["arguments"]

    def prompt(self) -> list[int]:
        if self.prompt_token_ids is not None:
            return self.prompt_token_ids
        for c in self._choices.values():
            if c.prompt_ids is not None:
                return c.prompt_ids
        return []

    def stop_reason(self, index: int) -> Any:
        """The stop string (or token) that ended a choice, as vLLM reports it."""
        c = self._choices.get(index)
        return c.stop_reason if c is not None else None

    def token_versions(self) -> list[list[list[int]]]:
        """Per choice, who sampled each token (run-length), where the engine says."""
        return [c.versions for _, c in sorted(self._choices.items())]

    def choices(self) -> list[ChoiceTokens]:
        return [ChoiceTokens(token_ids=c.token_ids, logprobs=c.logprobs, finish_reason=c.finish_reason)
                for _, c in sorted(self._choices.items())]

    def response(self) -> dict[str, Any]:
        """The complete (non-streamed equivalent) response, as stored with the call."""
        choices = []
        for i, c in sorted(self._choices.items()):
            if self.api == ApiKind.CHAT:
                msg: dict[str, Any] = {"role": c.role, "content": "".join(c.text) if c.text else None}
                if c.tool_calls:
                    msg["tool_calls"] = [c.tool_calls[k] for k in sorted(c.tool_calls)]
                choices.append({"index": i, "message": msg, "finish_reason": c.finish_reason})
            else:
                choices.append({"index": i, "text": "".join(c.text), "finish_reason": c.finish_reason})
        obj = "chat.completion" if self.api == ApiKind.CHAT else "text_completion"
        out = {**self.meta, "object": obj, "choices": choices}
        if self.usage is not None:
            out["usage"] = self.usage
        return out
