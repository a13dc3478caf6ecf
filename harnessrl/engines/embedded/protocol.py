"""The engine dialect (vLLM's OpenAI server with ``return_token_ids``): request parsing and response shapes.

Kept apart from the HTTP plumbing so the shapes can be read (and tested) in one place. Fields the embedded
engine does not implement (penalties, logit_bias) are ignored: they would only change the distribution, and
the logprobs we report always describe the distribution we actually sampled from.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from harnessrl.byte_level import BYTE_OF
from harnessrl.engines.embedded.outputs import Delta
from harnessrl.engines.embedded.sampling import InvalidRequestError, SamplingParams


def sampling_params(body: dict[str, Any], *, chat: bool) -> SamplingParams:
    """Read OpenAI/vLLM sampling fields from a request body."""
    max_tokens = body.get("max_completion_tokens") if chat else None
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if chat:
        top_logprobs = int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
    else:
        top_logprobs = int(body.get("logprobs") or 0)
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    try:
        params = SamplingParams(
            max_tokens=None if max_tokens is None else int(max_tokens),
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
            top_k=int(body.get("top_k") or 0),
            n=1 if body.get("n") is None else int(body["n"]),
            seed=None if body.get("seed") is None else int(body["seed"]),
            stop=[str(s) for s in stop if s],
            stop_token_ids=[int(t) for t in body.get("stop_token_ids") or []],
            ignore_eos=bool(body.get("ignore_eos", False)),
            include_stop_str_in_output=bool(body.get("include_stop_str_in_output", False)),
            skip_special_tokens=bool(body.get("skip_special_tokens", True)),
            top_logprobs=top_logprobs,
        )
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"invalid sampling parameter: {exc}") from exc
    params.validate()
    return params


def render_chat(tokenizer: Any, body: dict[str, Any]) -> list[int]:
    """Apply the model's chat template (tools included) and tokenize without adding special tokens twice."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError("'messages' must be a non-empty list", param="messages")
    messages = [_flatten_content(m) for m in messages]
    kwargs = dict(body.get("chat_template_kwargs") or {})
    continue_final = bool(body.get("continue_final_message", False))
    try:
        text = tokenizer.apply_chat_template(
            messages,
            tools=body.get("tools") or None,
            add_generation_prompt=bool(body.get("add_generation_prompt", not continue_final)),
            continue_final_message=continue_final,
            chat_template=body.get("chat_template"),
            tokenize=False,
            **kwargs,
        )
    except Exception as exc:  # jinja errors, bad roles, missing template
        raise InvalidRequestError(f"could not apply the chat template: {exc}", param="messages") from exc
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _flatten_content(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or "role" not in message:
        raise InvalidRequestError("each message needs a 'role'", param="messages")
    content = message.get("content")
    if isinstance(
        content, list
    ):  # [{"type": "text", "text": ...}, ...] -> plain text for text-only templates
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", None)
        ]
        message = {**message, "content": "".join(parts)}
    return message


def completion_prompts(tokenizer: Any, body: dict[str, Any]) -> list[list[int]]:
    """``prompt`` as text, token IDs, or a list of either (or vLLM's ``prompt_token_ids``)."""
    if body.get("echo"):
        raise InvalidRequestError("echo is not supported by the embedded engine", param="echo")
    if body.get("suffix"):
        raise InvalidRequestError("suffix is not supported by the embedded engine", param="suffix")
    prompt = body.get("prompt_token_ids", body.get("prompt"))
    if isinstance(prompt, str):
        return [_encode(tokenizer, prompt)]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) for t in prompt):
            return [list(prompt)]
        if all(isinstance(p, str) for p in prompt):
            return [_encode(tokenizer, p) for p in prompt]
        if all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in prompt):
            return [list(p) for p in prompt]
    raise InvalidRequestError(
        "'prompt' must be a string, a list of token IDs, or a list of either", param="prompt"
    )


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


class TokenText:
    """Per-token strings and exact bytes for logprob entries, cached per token ID."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.text = lru_cache(maxsize=65536)(self._text)
        self.bytes = lru_cache(maxsize=65536)(self._bytes)

    def _text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def _bytes(self, token_id: int) -> list[int]:
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        if isinstance(piece, str) and piece and all(ch in BYTE_OF for ch in piece):
            return [BYTE_OF[ch] for ch in piece]  # byte-level BPE: the exact bytes, even mid-character
        return list(self._text(token_id).encode("utf-8"))

    def chat_logprobs(self, delta: Delta) -> dict[str, Any]:
        entries = []
        for i, (tid, lp) in enumerate(zip(delta.token_ids, delta.logprobs, strict=True)):
            top = delta.top_logprobs[i] if delta.top_logprobs else []
            entries.append(
                {
                    "token": self.text(tid),
                    "logprob": lp,
                    "bytes": self.bytes(tid),
                    "top_logprobs": [
                        {"token": self.text(t), "logprob": v, "bytes": self.bytes(t)} for t, v in top
                    ],
                }
            )
        return {"content": entries}

    def completion_logprobs(self, delta: Delta, offset: int) -> dict[str, Any]:
        tokens = [self.text(t) for t in delta.token_ids]
        offsets = []
        for tok in tokens:
            offsets.append(offset)
            offset += len(tok)
        top = []
        for i, (tid, lp) in enumerate(zip(delta.token_ids, delta.logprobs, strict=True)):
            entry = {self.text(tid): lp}
            for t, v in delta.top_logprobs[i] if delta.top_logprobs else []:
                entry.setdefault(self.text(t), v)
            top.append(entry)
        return {
            "tokens": tokens,
            "token_logprobs": list(delta.logprobs),
            "top_logprobs": top,
            "text_offset": offsets,
        }


def error_body(
    message: str, *, type_: str = "invalid_request_error", code: Any = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


def now() -> int:
    return int(time.time())
