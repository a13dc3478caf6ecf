"""One choice being generated: its tokens, text, stop conditions, and what it has already streamed.

Text is always ``tokenizer.decode(token_ids)`` of the whole completion (so returned token IDs decode to exactly
the returned text, with special tokens such as EOS skipped), cut before a stop string when one appears. While
streaming, a trailing incomplete UTF-8 character or a possible beginning of a stop string is held back.
"""

from __future__ import annotations

from typing import Any

import torch

from harnessrl.engines.embedded.outputs import Delta
from harnessrl.engines.embedded.request import Request


class Sequence:
    def __init__(self, req: Request, index: int, generator: torch.Generator) -> None:
        self.req = req
        self.index = index
        self.generator = generator
        self.token_ids: list[int] = []
        self.emitted = ""
        self.finish_reason: str | None = None

    @property
    def next_position(self) -> int:
        """Position of the last sampled token, which the next decode step feeds in."""
        return len(self.req.prompt_ids) + len(self.token_ids) - 1

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def append(
        self,
        token: int,
        logprob: float,
        top: list[tuple[int, float]],
        tokenizer: Any,
        eos_ids: frozenset[int],
        version: int | None = None,
    ) -> Delta:
        params = self.req.params
        self.token_ids.append(token)
        if token in params.stop_token_ids or (not params.ignore_eos and token in eos_ids):
            self.finish_reason = "stop"
        text = tokenizer.decode(self.token_ids, skip_special_tokens=params.skip_special_tokens)
        if self.finish_reason is None and params.stop:
            cut = _find_stop(text, params.stop, params.include_stop_str_in_output)
            if cut is not None:
                text, self.finish_reason = text[:cut], "stop"
        if self.finish_reason is None and (
            len(self.token_ids) >= self.req.max_tokens
            or len(self.req.prompt_ids) + len(self.token_ids) >= self.req.window
        ):
            self.finish_reason = "length"
        stable = text if self.finished else _stable_prefix(text, params.stop)
        delta_text = ""
        if stable.startswith(self.emitted):
            delta_text = stable[len(self.emitted) :]
            self.emitted = stable
        return Delta(
            self.index,
            [token],
            [logprob],
            [top] if params.top_logprobs else [],
            delta_text,
            self.finish_reason,
            version,
        )


def _find_stop(text: str, stops: list[str], include: bool) -> int | None:
    best: int | None = None
    for s in stops:
        at = text.find(s)
        if at >= 0:
            end = at + len(s) if include else at
            best = end if best is None else min(best, end)
    return best


def _stable_prefix(text: str, stops: list[str]) -> str:
    """The part of ``text`` that later tokens cannot change or cut."""
    text = text.rstrip("\ufffd")
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return text[: len(text) - hold] if hold else text
