"""The token-exact chat renderer: the model's chat template, applied by the gateway, reusing sampled tokens.

Re-tokenizing a conversation's history can give token IDs the policy never produced (other merges, other
whitespace, tool calls re-serialized). So for each request we look for the longest earlier call of the
rollout whose conversation (its messages plus the assistant message we returned) is a prefix of the new
one, compared message by message, and reuse that call's prompt and sampled completion token for token.
Only the text the template adds after that assistant turn (its closing glue, tool results, user turns, the
generation prompt) is tokenized, and we take it from the template's rendering of the whole conversation,
after checking that the rendering of the reused part is a prefix of it. Some templates render earlier
assistant turns differently once later ones exist (Qwen3 drops their thinking): the sampled tokens still
stand, and the new text starts after the same number of turns in the full rendering; when anything else
renders differently we re-render from scratch and say why.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.gateway.errors import LimitExceeded
from harnessrl.gateway.render.base import RenderedPrompt, RenderError
from harnessrl.gateway.render.config import RenderConfig
from harnessrl.gateway.render.history import ChainEntry, RolloutHistory, token_array
from harnessrl.gateway.render.messages import (
    Conversation,
    content_text,
    normalize_conversation,
    normalize_message,
    roll,
)
from harnessrl.gateway.render.streaming import StreamingParse
from harnessrl.gateway.render.text import ChatTemplate
from harnessrl.gateway.render.toolcalls import make_tool_parser
from harnessrl.types import ApiKind, Call, CallStatus, Fidelity

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _RenderState:
    conversation: Conversation
    parent: ChainEntry | None
    parent_len: int
    text_len: int = -1
    text_digest: bytes = b""


def _text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def split_thinking(text: str) -> tuple[str | None, str]:
    """(reasoning, the rest) of a completion that thinks in ``<think>...</think>`` first; (None, text) when
    it does not. A completion cut off while thinking is all reasoning."""
    if "</think>" in text:
        head, _, rest = text.partition("</think>")
        return head.split("<think>", 1)[-1].strip("\n"), rest.lstrip("\n")
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        return stripped[len("<think>"):].lstrip("\n"), ""
    return None, text


def _after_turns(text: str, eot: str, n: int) -> int:
    """The position just after the ``n``-th ``eot`` in ``text``, or -1."""
    at = 0
    for _ in range(n):
        found = text.find(eot, at)
        if found < 0:
            return -1
        at = found + len(eot)
    return at if n else -1


class TemplateRenderer:
    """:class:`~harnessrl.gateway.render.base.ChatRenderer` backed by a transformers tokenizer."""

    def __init__(self, tokenizer: Any, config: RenderConfig | None = None) -> None:
        config = config or RenderConfig()
        self.tokenizer = tokenizer
        self.chat = ChatTemplate(tokenizer, config.chat_template)
        self.template_name, self.template = self.chat.name, self.chat.template
        self.end_of_turn_text, self.stop_token_ids = self.chat.end_of_turn_text, self.chat.stop_token_ids
        self.render_text, self.encode = self.chat.render_text, self.chat.encode
        self.tool_parser_name, self._parser = make_tool_parser(config.tool_parser, self.template)
        if config.reasoning not in ("auto", "think", "none"):
            raise ValueError(f"render.reasoning must be 'auto', 'think' or 'none', not {config.reasoning!r}")
        self.thinks = config.reasoning == "think" or (config.reasoning == "auto" and "</think>" in self.template)
        self._max_attempts = config.max_prefix_attempts
        self._max_history = config.max_history_tokens
        self._histories: dict[str, RolloutHistory] = {}
        self._lock = threading.Lock()
        logger.info(
            "gateway render mode: template %s, tool parser %s, stop tokens %s",
            self.template_name, self.tool_parser_name, self.stop_token_ids,
        )

    @classmethod
    def from_pretrained(cls, path: str | Path, config: RenderConfig | None = None, **kwargs: Any) -> TemplateRenderer:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(path), **kwargs), config)

    # -- ChatRenderer ----------------------------------------------------------------------------------
    def render(self, rollout_id: str, body: dict[str, Any]) -> RenderedPrompt:
        conv = normalize_conversation(body.get("messages"), body.get("tools"))
        continuing = conv.messages[-1]["role"] == "assistant"
        full_text = self.render_text(conv.messages, conv.tools, generation=True, continue_final=continuing)
        with self._lock:
            history = self._histories.get(rollout_id)
            if history is not None and history.tokens >= self._max_history:
                raise LimitExceeded(
                    f"this rollout's render history holds {history.tokens} tokens, the most one rollout may keep "
                    f"([gateway.render] max_history_tokens = {self._max_history}); finish the rollout",
                    code="render_history_budget")
            candidates = list(history.candidates(conv.prefix_digests)) if history else []
            had_history = bool(history and history.entries)
        reasons: list[str] = []
        attempts = 0
        for k, entries in candidates:
            same_tools = [e for e in entries if e.tools_key == conv.tools_key]
            if not same_tools:
                reasons.append(f"tool definitions changed since call {entries[-1].label}")
                continue
            entry = same_tools[-1]  # retries of one turn: the latest whose answer the harness kept
            outcome = self._extend(entry, conv, k, full_text, continuing)
            if isinstance(outcome, RenderedPrompt):
                outcome.state.text_len, outcome.state.text_digest = len(full_text), _text_digest(full_text)
                return outcome
            reasons.append(outcome)
            attempts += 1
            if attempts >= self._max_attempts:
                break
        if reasons:
            reason = reasons[0]
        elif had_history:
            reason = "no earlier call's conversation is a prefix of this one (history summarized, truncated or edited)"
        else:
            reason = "first call of this chain"
        return RenderedPrompt(
            prompt_token_ids=self.encode(full_text), fidelity=Fidelity.RERENDERED, fidelity_reason=reason,
            stop_token_ids=list(self.stop_token_ids),
            state=_RenderState(conv, None, 0, len(full_text), _text_digest(full_text)),
        )

    def _extend(
        self, entry: ChainEntry, conv: Conversation, k: int, full_text: str, continuing: bool
    ) -> RenderedPrompt | str:
        """Reuse ``entry``'s tokens for the first ``k`` messages, or say why the template forbids it."""
        if k == len(conv.messages):  # the harness asks the model to continue its own last answer
            prompt = entry.prompt_ids()
            parent_len = len(prompt) + len(entry.completion)
            prompt.extend(entry.completion)
            return RenderedPrompt(
                prompt, Fidelity.EXACT, None, list(self.stop_token_ids), reused_tokens=parent_len,
                parent=entry.label, state=_RenderState(conv, entry, parent_len),
            )
        prefix_text = self.render_text(conv.messages[:k], conv.tools, generation=False)
        suffix_start, kept_reason = len(prefix_text), None
        if not full_text.startswith(prefix_text):
            # Some templates render earlier assistant turns differently once a later user turn exists
            # (Qwen3 drops their thinking). The sampled tokens stand: take from the full rendering only what
            # follows call's turn -- found as the end of the same number of turns.
            suffix_start = _after_turns(full_text, self.end_of_turn_text, prefix_text.count(self.end_of_turn_text)
                                        if self.end_of_turn_text else 0)
            first = next(i for i, m in enumerate(conv.messages) if m["role"] == "assistant")
            before = self.render_text(conv.messages[:first], conv.tools, generation=True)
            if suffix_start < 0 or not (full_text.startswith(before) and prefix_text.startswith(before)):
                return (f"the chat template renders the turns of call {entry.label} differently once later "
                        "turns are added")
            kept_reason = (f"the chat template renders call {entry.label}'s turn differently once later turns "
                           "are added (e.g. it drops the thinking); its sampled tokens were kept")
        if not prefix_text.endswith(self.end_of_turn_text):
            return f"the chat template does not close call {entry.label}'s assistant turn with {self.end_of_turn_text!r}"
        known = entry.prompt_text_len
        if known < 0 or _text_digest(prefix_text[:known]) != entry.prompt_text_digest:
            generation_text = self.render_text(conv.messages[: k - 1], conv.tools, generation=True)
        else:  # the turn starts where the text of call's prompt ended: no need to render it again
            generation_text = prefix_text[:known]
        if not prefix_text.startswith(generation_text):
            return f"the chat template renders call {entry.label}'s assistant turn unlike its generation prompt"
        prompt = entry.context_ids()
        parent_len = len(prompt)
        suffix = self.encode(full_text[suffix_start:])
        prompt.extend(suffix)
        appended = len(entry.end_of_turn)
        fidelity = Fidelity.EXACT if not suffix and not appended else Fidelity.EXTENDED
        reason = kept_reason
        if appended == len(self.chat.end_of_turn_ids) and appended:
            # Not even the end-of-turn token was sampled (stopped by length or a stop string): say so.
            reason = f"call {entry.label}'s turn was closed with {appended} end-of-turn token(s) it did not sample"
        return RenderedPrompt(
            prompt, fidelity, reason, list(self.stop_token_ids), reused_tokens=parent_len - appended,
            end_of_turn_appended=appended, parent=entry.label, state=_RenderState(conv, entry, parent_len),
        )

    def parse(
        self, rollout_id: str, completion_token_ids: list[int], finish_reason: str
    ) -> tuple[dict[str, Any], str]:
        ids = list(completion_token_ids)
        while ids and ids[-1] in self.stop_token_ids:
            ids.pop()
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        reasoning = None
        if self.thinks:
            reasoning, text = split_thinking(text)
        parsed = self._parser.parse(text)
        if not parsed.tool_calls:
            message = {"role": "assistant", "content": text}
            if reasoning is not None:
                message["reasoning_content"] = reasoning
            return message, finish_reason
        with self._lock:
            history = self._histories.setdefault(rollout_id, RolloutHistory())
            first = history.tool_calls_issued
            history.tool_calls_issued += len(parsed.tool_calls)
        tool_calls = [
            {"id": f"call_{rollout_id}_{first + i}", "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for i, call in enumerate(parsed.tool_calls)
        ]
        message = {"role": "assistant", "content": parsed.content, "tool_calls": tool_calls}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        return message, "tool_calls"

    def stream_parse(self, rollout_id: str) -> StreamingParse:
        """An incremental parser of one streamed completion (see ``render.streaming``)."""
        return StreamingParse(self, rollout_id)

    def remember(
        self, rollout_id: str, body: dict[str, Any], rendered: RenderedPrompt, completion_token_ids: list[int],
        message: dict[str, Any], call_index: int | None = None,
    ) -> None:
        state = rendered.state if isinstance(rendered.state, _RenderState) else None
        conv = state.conversation if state else normalize_conversation(body.get("messages"), body.get("tools"))
        parent, parent_len = (state.parent, state.parent_len) if state else (None, 0)
        with self._lock:
            history = self._histories.setdefault(rollout_id, RolloutHistory())
            label = history.next_label if call_index is None else call_index
            entry = self._entry(label, conv, rendered.prompt_token_ids, parent, parent_len,
                                completion_token_ids, message)
            if state:
                entry.prompt_text_len, entry.prompt_text_digest = state.text_len, state.text_digest
            history.add(entry)

    def _entry(
        self, label: int, conv: Conversation, prompt: list[int], parent: ChainEntry | None, parent_len: int,
        completion: list[int], message: dict[str, Any],
    ) -> ChainEntry:
        assistant = {**message, "role": "assistant"}
        if conv.messages[-1]["role"] == "assistant":  # a continued (prefilled) answer: one merged message
            assistant["content"] = conv.messages[-1]["content"] + content_text(message.get("content"))
            base, n = conv.prefix_digests[-2], len(conv.messages)
        else:
            base, n = conv.prefix_digests[-1], len(conv.messages) + 1
        _, key = normalize_message(assistant)
        completion = list(completion)
        return ChainEntry(
            label=label, conversation_digest=roll(base, key), n_messages=n, tools_key=conv.tools_key,
            parent=parent, parent_len=parent_len, own=token_array(prompt[parent_len:]),
            completion=token_array(completion), end_of_turn=token_array(self.chat.end_of_turn_for(completion)),
        )

    def load(self, rollout_id: str, calls: list[Call]) -> None:
        history = RolloutHistory()
        prefix = f"call_{rollout_id}_"
        for call in sorted(calls, key=lambda c: c.index):
            if call.api != ApiKind.CHAT or call.status != CallStatus.OK or not call.response:
                continue
            try:
                conv = normalize_conversation(call.request.get("messages"), call.request.get("tools"))
            except RenderError:
                continue
            prompt = list(call.prompt_token_ids)
            parent, parent_len = self._link_by_tokens(history, conv, prompt)
            messages = [c.get("message") for c in call.response.get("choices") or []]
            for choice, message in zip(call.choices, messages, strict=False):
                if not isinstance(message, dict):
                    continue
                history.add(self._entry(call.index, conv, prompt, parent, parent_len, choice.token_ids, message))
                for tool_call in message.get("tool_calls") or []:
                    suffix = str(tool_call.get("id", ""))[len(prefix):]
                    if str(tool_call.get("id", "")).startswith(prefix) and suffix.isdigit():
                        history.tool_calls_issued = max(history.tool_calls_issued, int(suffix) + 1)
        with self._lock:
            self._histories[rollout_id] = history

    @staticmethod
    def _link_by_tokens(
        history: RolloutHistory, conv: Conversation, prompt: list[int]
    ) -> tuple[ChainEntry | None, int]:
        """Which stored call a stored prompt extended, checked on tokens (nothing is re-rendered)."""
        for _, entries in history.candidates(conv.prefix_digests):
            for entry in reversed(entries):
                context = entry.context_ids()
                sampled = len(context) - len(entry.end_of_turn)
                for length in (len(context), sampled):
                    if len(prompt) >= length and prompt[:length] == context[:length]:
                        return entry, length
        return None, 0

    def forget(self, rollout_id: str) -> None:
        """Drop a finished rollout's history (its calls stay in the store)."""
        with self._lock:
            self._histories.pop(rollout_id, None)
