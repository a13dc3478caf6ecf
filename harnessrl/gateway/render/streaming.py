"""Sampled tokens to chat deltas while they are sampled (gateway render mode, streamed requests).

Text is detokenized incrementally (a token that ends inside a multi-byte character waits for the next)
and sent as content at once, except what could be the start of a tool call: from the tool-call parser's
start marker on (and any text tail that may be the first characters of that marker) nothing more is sent
until the completion ends. Then the whole completion is parsed exactly as a non-streamed call would be,
and what was held back goes out: the rest of the content and the tool calls.
"""

from __future__ import annotations

from typing import Any


class StreamingParse:
    def __init__(self, renderer: Any, rollout_id: str) -> None:
        self._r, self._rid = renderer, rollout_id
        self._tok = renderer.tokenizer
        self._stops = set(renderer.stop_token_ids)
        self._marker: str | None = getattr(renderer._parser, "start_marker", None)
        self.ids: list[int] = []
        self._prefix = self._read = 0
        self.text = ""
        self.sent = 0  # characters of ``text`` sent as content
        self._held = False  # a tool call started: the rest waits for the final parse

    def _new_text(self) -> str:
        ids = [t for t in self.ids if t not in self._stops]
        before = self._tok.decode(ids[self._prefix:self._read], skip_special_tokens=True)
        after = self._tok.decode(ids[self._prefix:], skip_special_tokens=True)
        if len(after) <= len(before) or after.endswith("\ufffd"):
            return ""
        self._prefix, self._read = self._read, len(ids)
        return after[len(before):]

    def add(self, token_ids: list[int]) -> dict[str, Any]:
        """The delta to send for newly sampled tokens (empty when nothing can be sent yet)."""
        self.ids.extend(token_ids)
        self.text += self._new_text()
        if self._held:
            return {}
        end = len(self.text)
        if self._marker:
            at = self.text.find(self._marker, self.sent)
            if at >= 0:
                end, self._held = at, True
            else:  # keep back a tail that may be the marker's beginning
                for k in range(min(len(self._marker) - 1, end - self.sent), 0, -1):
                    if self.text.endswith(self._marker[:k]):
                        end -= k
                        break
        if end <= self.sent:
            return {}
        delta = {"content": self.text[self.sent:end]}
        self.sent = end
        return delta

    def finish(self, finish_reason: str) -> tuple[dict[str, Any], str, dict[str, Any]]:
        """(the message as the harness receives it, finish reason, the delta still to send) at the end.

        The message is what a non-streamed call would answer, except that content already sent stays as
        sent (a parser may trim the text around tool calls): the harness sends back what it received.
        """
        message, finish = self._r.parse(self._rid, self.ids, finish_reason)
        sent = self.text[:self.sent]
        content = message.get("content") or ""
        delta: dict[str, Any] = {}
        if content.startswith(sent) and len(content) > len(sent):
            delta["content"] = content[len(sent):]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
        got = sent + delta.get("content", "")
        return {**message, "content": got or None}, finish, delta
