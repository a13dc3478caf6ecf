"""Sampled tokens to chat deltas while they are sampled (gateway render mode, streamed requests).

Text is detokenized incrementally (a token that ends inside a multi-byte character waits for the next)
and sent at once, except what could be the start of a tool call: from the tool-call parser's start marker
on (and any text tail that may be the first characters of that marker) nothing more is sent until the
completion ends. Then the whole completion is parsed exactly as a non-streamed call would be, and what was
held back goes out: the rest of the content and the tool calls. A model that thinks first
(``<think>...</think>``, when the renderer ``thinks``) streams its thinking as ``reasoning_content``.
"""

from __future__ import annotations

from typing import Any

_OPEN, _CLOSE = "<think>", "</think>"


def _safe_end(text: str, start: int, marker: str | None) -> tuple[int, bool]:
    """How far ``text[start:]`` may be sent before ``marker`` (or a tail that may begin it); and whether
    the marker itself was found there."""
    end = len(text)
    if not marker:
        return end, False
    at = text.find(marker, start)
    if at >= 0:
        return at, True
    for k in range(min(len(marker) - 1, end - start), 0, -1):
        if text.endswith(marker[:k]):
            return end - k, False
    return end, False


class StreamingParse:
    def __init__(self, renderer: Any, rollout_id: str) -> None:
        self._r, self._rid = renderer, rollout_id
        self._tok = renderer.tokenizer
        self._stops = set(renderer.stop_token_ids)
        self._marker: str | None = getattr(renderer._parser, "start_marker", None)
        self.ids: list[int] = []
        self._prefix = self._read = 0
        self.text = ""
        # phases: "start" (may open with <think>), "think", "content", "held" (a tool call started)
        self._phase = "start" if getattr(renderer, "thinks", False) else "content"
        self._r_start = self._r_sent = 0  # reasoning: where it starts in ``text``, how far it was sent
        self._c_start = self._c_sent = 0  # content: likewise

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
        text, delta = self.text, {}
        if self._phase == "start":
            body = text.lstrip()
            if body.startswith(_OPEN):
                self._phase = "think"
                self._r_start = self._r_sent = len(text) - len(body) + len(_OPEN)
            elif not _OPEN.startswith(body):
                self._phase = "content"
        if self._phase == "think":
            while self._r_sent == self._r_start and text[self._r_start:self._r_start + 1] == "\n":
                self._r_start = self._r_sent = self._r_start + 1  # the newline after <think>
            end, closed = _safe_end(text, self._r_sent, _CLOSE)
            if closed:  # trailing newlines before </think> are not part of the reasoning
                end = len(text[:end].rstrip("\n"))
            elif end > self._r_sent and text[:end].endswith("\n"):
                end = len(text[:end].rstrip("\n"))
            if end > self._r_sent:
                delta["reasoning_content"] = text[self._r_sent:end]
                self._r_sent = end
            if closed:
                self._phase = "content"
                self._c_start = self._c_sent = text.find(_CLOSE, self._r_start) + len(_CLOSE)
        if self._phase == "content":
            while self._c_sent == self._c_start and text[self._c_start:self._c_start + 1] == "\n" \
                    and self._r_start:
                self._c_start = self._c_sent = self._c_start + 1  # the newlines after </think>
            end, found = _safe_end(text, self._c_sent, self._marker)
            if found:
                self._phase = "held"
            if end > self._c_sent:
                delta["content"] = text[self._c_sent:end]
                self._c_sent = end
        return delta

    def finish(self, finish_reason: str) -> tuple[dict[str, Any], str, dict[str, Any]]:
        """(the message as the harness receives it, finish reason, the delta still to send) at the end.

        The message is what a non-streamed call would answer, except that what was already sent stays as
        sent (a parser may trim the text around tool calls): the harness sends back what it received.
        """
        message, finish = self._r.parse(self._rid, self.ids, finish_reason)
        delta: dict[str, Any] = {}
        out = dict(message)
        for key, start, sent_to in (("reasoning_content", self._r_start, self._r_sent),
                                    ("content", self._c_start, self._c_sent)):
            sent = self.text[start:sent_to]
            final = message.get(key) or ""
            if final.startswith(sent) and len(final) > len(sent):
                delta[key] = final[len(sent):]
            got = sent + delta.get(key, "")
            if key in message or got:
                out[key] = got or (None if key == "content" else "")
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
        return out, finish, delta
