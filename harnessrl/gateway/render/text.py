"""A model's chat template as text, and the tokenizer that turns that text into token IDs.

Everything the renderer needs to know about a model family lives here: which template, how it closes an
assistant turn (the end-of-turn text, derived by rendering a sentinel so no family needs hard-coding), which
tokens stop generation.
"""

from __future__ import annotations

import logging
from typing import Any

from harnessrl.gateway.render.base import RenderError
from harnessrl.gateway.render.templates import resolve_chat_template

logger = logging.getLogger(__name__)

_SENTINEL = "\u2063HARNESSRL_SENTINEL\u2063"


class ChatTemplate:
    def __init__(self, tokenizer: Any, choice: str = "auto") -> None:
        self.tokenizer = tokenizer
        self.name, self.template = resolve_chat_template(tokenizer, choice)
        self._template_kwargs: dict[str, Any] = {}
        self.compiled = self._compile_fast_path()
        self.end_of_turn_text = self._derive_end_of_turn()
        self.end_of_turn_ids = self.encode(self.end_of_turn_text)
        stops = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        special = set(getattr(tokenizer, "all_special_ids", []))
        if self.end_of_turn_ids and self.end_of_turn_ids[0] in special:
            stops.add(self.end_of_turn_ids[0])
        self.stop_token_ids = sorted(stops)

    def _compile_fast_path(self) -> Any:
        """The compiled template, rendered directly: ``apply_chat_template`` spends about a third of its time
        re-normalizing messages we already normalized. Used only if it renders a probe identically."""
        try:
            from transformers.utils.chat_template_utils import _compile_jinja_template

            compiled = _compile_jinja_template(self.template)
        except Exception:  # a private helper: if it moves, the public path still works
            return None
        probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                 {"role": "assistant", "content": "a", "tool_calls": [
                     {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
                 {"role": "tool", "tool_call_id": "c", "content": "r"}]
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        kwargs = dict(self.tokenizer.special_tokens_map)
        try:
            for gen in (False, True):
                fast = compiled.render(messages=probe, tools=tools, documents=None, add_generation_prompt=gen, **kwargs)
                slow = self.tokenizer.apply_chat_template(probe, tools=tools, chat_template=self.template,
                                                          tokenize=False, add_generation_prompt=gen)
                if fast != slow:
                    return None
        except Exception:
            return None
        self._template_kwargs = kwargs
        return compiled

    def render_text(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, generation: bool,
        continue_final: bool = False,
    ) -> str:
        if self.compiled is not None and not continue_final:
            try:
                return self.compiled.render(messages=messages, tools=tools, documents=None,
                                             add_generation_prompt=generation, **self._template_kwargs)
            except Exception as exc:
                raise RenderError(
                    f"the chat template ({self.name}) could not render this conversation: {exc}"
                ) from exc
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools, chat_template=self.template, tokenize=False,
                add_generation_prompt=generation and not continue_final, continue_final_message=continue_final,
            )
        except Exception as exc:  # jinja errors, template-raised exceptions, bad continue_final_message
            raise RenderError(f"the chat template ({self.name}) could not render this conversation: {exc}") from exc
        return text if isinstance(text, str) else text[0]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def _derive_end_of_turn(self) -> str:
        """The text the template puts after an assistant message's content (``<|im_end|>\\n`` for ChatML)."""
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _SENTINEL}]
        try:
            text = self.render_text(messages, None, generation=False)
        except RenderError:  # a template with stricter rules (e.g. a required system turn): no glue known
            logger.warning("chat template %s: cannot derive its end-of-turn text; appending none", self.name)
            return ""
        at = text.rfind(_SENTINEL)
        return text[at + len(_SENTINEL):] if at >= 0 else ""

    def end_of_turn_for(self, completion: list[int]) -> list[int]:
        """The end-of-turn tokens to append after ``completion``: those the engine did not sample already
        (it may or may not include the stop token it stopped on)."""
        eot = self.end_of_turn_ids
        for j in range(min(len(eot), len(completion)), 0, -1):
            if completion[-j:] == eot[:j]:
                return eot[j:]
        return list(eot)
