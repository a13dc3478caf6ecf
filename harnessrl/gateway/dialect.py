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


#: Numeric sampling fields and whether they must be integers.
_NUMBERS = {"temperature": False, "top_p": False, "min_p": False, "presence_penalty": False,
            "frequency_penalty": False, "repetition_penalty": False, "top_k": True, "seed": True,
            "top_logprobs": True}
#: Most choices one request may ask for (each is sampled and recorded).
MAX_N = 128


def _content_ok(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("type", "text"), str)
        and isinstance(p.get("text", ""), str) for p in content)


def _validate_message(i: int, m: Any) -> None:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
    if not _content_ok(m.get("content")):
        raise BadRequest(f"messages[{i}].content must be a string, null or a list of text parts")
    for key in ("name", "tool_call_id", "reasoning_content"):
        if m.get(key) is not None and not isinstance(m[key], str):
            raise BadRequest(f"messages[{i}].{key} must be a string")
    calls = m.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise BadRequest(f"messages[{i}].tool_calls must be a list")
    for k, tc in enumerate(calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("arguments", ""), str) or not isinstance(tc.get("id", ""), str):
            raise BadRequest(f"messages[{i}].tool_calls[{k}] must have a string id and a function with "
                             "string name and arguments")


def _validate_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    for k, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("parameters") or {}, dict) \
                or not isinstance(fn.get("description") or "", str):
            raise BadRequest(f"tools[{k}] must be {{'type': 'function', 'function': {{'name': str, "
                             "'parameters': object}}")


def validate(api: ApiKind, body: Any) -> None:
    """Refuse malformed requests with a 400 that says which field is wrong (nothing malformed reaches the
    engine, so that an engine error always means an engine problem)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if "model" in body and not isinstance(body["model"], str | None):
        raise BadRequest("'model' must be a string")
    if api == ApiKind.CHAT:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' is required and must be a non-empty list")
        for i, m in enumerate(msgs):
            _validate_message(i, m)
        if "logprobs" in body and not isinstance(body["logprobs"], bool | None):
            raise BadRequest("'logprobs' must be true or false")
        if body.get("tool_choice") is not None and not isinstance(body["tool_choice"], str | dict):
            raise BadRequest("'tool_choice' must be a string or an object")
    else:
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str | list):
            p = p[0]
        ok = isinstance(p, str) or (isinstance(p, list) and p and all(type(t) is int and t >= 0 for t in p))
        if not ok:
            raise BadRequest("'prompt' is required: one string or one list of token ids (no batches)")
        lp = body.get("logprobs")
        if lp is not None and (type(lp) is not int or lp < 0):
            raise BadRequest("'logprobs' must be a non-negative integer")
    for key in ("n", "max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None and (type(v) is not int or v < 1):
            raise BadRequest(f"'{key}' must be a positive integer")
    if (body.get("n") or 1) > MAX_N:
        raise BadRequest(f"'n' may be at most {MAX_N}")
    for key, integer in _NUMBERS.items():
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int if integer else int | float)):
            raise BadRequest(f"'{key}' must be {'an integer' if integer else 'a number'}")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(x, str) for x in stop)):
        raise BadRequest("'stop' must be a string or a list of strings")
    for key in ("stream", "return_token_ids", "parallel_tool_calls"):
        if key in body and not isinstance(body[key], bool | None):
            raise BadRequest(f"'{key}' must be true or false")
    for key in ("stream_options", "logit_bias", "response_format", "chat_template_kwargs", "metadata"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise BadRequest(f"'{key}' must be an object")
    if "tools" in body and body["tools"] is not None:
        _validate_tools(body["tools"])


def plan(api: ApiKind, body: dict, config: GatewayConfig, engine_model: str | None,
         tokens_left: int, pinned: dict[str, Any] | None = None) -> Plan:
    """Build the engine request: limits applied, pinned sampling forced, token ids and logprobs on."""
    limits = config.limits
    n = body.get("n") or 1
    asked = body.get("max_tokens") or body.get("max_completion_tokens")
    budget_each = tokens_left // n
    if budget_each <= 0:
        raise LimitExceeded(
            f"the rollout's token budget ({limits.max_tokens_per_rollout} completion tokens) is used up",
            code="rollout_token_budget",
        )
    # More than the cap or the budget allows is served with the lower limit (recorded below), not refused.
    max_tokens = min(asked or limits.max_tokens_per_call, limits.max_tokens_per_call, budget_each)
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
    if asked is not None and asked != max_tokens:
        sampling["max_tokens_requested"] = asked
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
