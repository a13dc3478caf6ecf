"""Translation between what a harness sends/receives (standard OpenAI) and the engine dialect (vLLM).

Pure functions over dicts: validate a request, turn it into the engine request (token ids and logprobs
on, limits and pinned sampling applied), pull the token record out of a response, and strip the extra
fields again so that a standard client sees a standard response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.errors import BadRequest, LimitExceeded
from harnessrl.types import ApiKind, ChoiceTokens

#: Request fields that change the sampling distribution or length; recorded with every call.
SAMPLING_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "n", "max_tokens", "stop", "stop_token_ids", "logit_bias",
)
#: Parameters that change the sampling distribution: a rollout's creator may pin them (``metadata.sampling``).
PINNABLE = frozenset({"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                      "repetition_penalty", "seed"})
#: Fields the engine adds that a standard client does not expect.
_TOP_EXTRAS = ("prompt_token_ids", "prompt_logprobs", "kv_transfer_params", "policy_version")
_CHOICE_TOKEN_EXTRAS = ("token_ids", "prompt_token_ids")
_CHOICE_EXTRAS = ("stop_reason", "prompt_logprobs")


@dataclass(slots=True)
class Plan:
    """The engine request for one harness request, plus what to give back and record."""

    upstream: dict[str, Any]
    sampling: dict[str, Any]
    stream: bool
    want_logprobs: bool
    want_token_ids: bool
    max_tokens: int
    n: int


def validate(api: ApiKind, body: Any) -> None:
    """Refuse malformed requests with a 400 that says which field is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if "model" in body and not isinstance(body["model"], str):
        raise BadRequest("'model' must be a string")
    if api == ApiKind.CHAT:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' is required and must be a non-empty list")
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
    else:
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str | list):
            p = p[0]
        ok = isinstance(p, str) or (isinstance(p, list) and p and all(type(t) is int for t in p))
        if not ok:
            raise BadRequest("'prompt' is required: one string or one list of token ids (no batches)")
    for key in ("n", "max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None and (type(v) is not int or v < 1):
            raise BadRequest(f"'{key}' must be a positive integer")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false")
    if "tools" in body and not isinstance(body["tools"], list):
        raise BadRequest("'tools' must be a list")


def plan(api: ApiKind, body: dict, config: GatewayConfig, engine_model: str | None,
         tokens_left: int, pinned: dict[str, Any] | None = None) -> Plan:
    """Build the engine request: limits applied, pinned sampling forced, token ids and logprobs on."""
    limits = config.limits
    n = body.get("n") or 1
    asked = body.get("max_tokens") or body.get("max_completion_tokens")
    if asked is not None and asked > limits.max_tokens_per_call:
        raise LimitExceeded(
            f"max_tokens={asked} exceeds this gateway's cap of {limits.max_tokens_per_call} per call",
            code="max_tokens_per_call",
        )
    budget_each = tokens_left // n
    if budget_each <= 0:
        raise LimitExceeded(
            f"the rollout's token budget ({limits.max_tokens_per_rollout} completion tokens) is used up",
            code="rollout_token_budget",
        )
    max_tokens = min(asked or limits.max_tokens_per_call, budget_each)
    up = dict(body)
    up.pop("max_completion_tokens", None)
    up["max_tokens"] = max_tokens
    up.update(config.pinned_sampling)
    up.update(pinned or {})
    if engine_model is not None:
        up["model"] = engine_model
    up["return_token_ids"] = True
    if api == ApiKind.CHAT:
        want_logprobs = bool(body.get("logprobs"))
        up["logprobs"] = True
        up["top_logprobs"] = (body.get("top_logprobs") or 0) if want_logprobs else 0
    else:
        want_logprobs = body.get("logprobs") is not None
        up["logprobs"] = body.get("logprobs") or 0
        if isinstance(up.get("prompt"), list) and len(up["prompt"]) == 1:
            up["prompt"] = up["prompt"][0]
    sampling = {k: up[k] for k in SAMPLING_KEYS if k in up}
    sampling.setdefault("n", n)
    return Plan(upstream=up, sampling=sampling, stream=bool(body.get("stream")),
                want_logprobs=want_logprobs, want_token_ids=bool(body.get("return_token_ids")),
                max_tokens=max_tokens, n=n)


def choice_logprobs(api: ApiKind, lp: Any) -> list[float]:
    """The sampled tokens' logprobs from a choice's (or a chunk delta's) ``logprobs`` object."""
    if not lp:
        return []
    if api == ApiKind.CHAT:
        return [float(e["logprob"]) for e in (lp.get("content") or [])]
    return [float(x) if x is not None else 0.0 for x in (lp.get("token_logprobs") or [])]


def extract(api: ApiKind, resp: dict) -> tuple[list[int], list[ChoiceTokens]]:
    """(prompt token ids, one ChoiceTokens per choice in index order) from a complete response."""
    prompt = resp.get("prompt_token_ids")
    choices = []
    for ch in sorted(resp.get("choices") or [], key=lambda c: c.get("index", 0)):
        if prompt is None:
            prompt = ch.get("prompt_token_ids")
        choices.append(ChoiceTokens(token_ids=list(ch.get("token_ids") or []),
                                    logprobs=choice_logprobs(api, ch.get("logprobs")),
                                    finish_reason=ch.get("finish_reason")))
    return list(prompt or []), choices


def strip(resp: dict, want_logprobs: bool, want_token_ids: bool) -> dict:
    """Remove engine-only fields in place so a standard client sees a standard object."""
    if not want_token_ids:
        for k in _TOP_EXTRAS:
            resp.pop(k, None)
    else:
        resp.pop("policy_version", None)
    for ch in resp.get("choices") or ():
        if not want_token_ids:
            for k in _CHOICE_TOKEN_EXTRAS:
                ch.pop(k, None)
        for k in _CHOICE_EXTRAS:
            ch.pop(k, None)
        if not want_logprobs and "logprobs" in ch:
            ch["logprobs"] = None
    return resp
