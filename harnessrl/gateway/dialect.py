"""Translation between what a harness sends/receives (standard OpenAI) and the engine dialect (vLLM).

Pure functions over dicts: turn a validated request into the engine request (token ids and logprobs
on, limits and pinned sampling applied) and pull the token record out of a response
(``apis.chat.strip`` removes the engine's extra fields again for a standard client).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.errors import LimitExceeded
from harnessrl.types import ApiKind, ChoiceTokens

#: Request fields that change the sampling distribution or length; recorded with every call.
SAMPLING_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "n", "max_tokens", "stop", "stop_token_ids", "logit_bias",
)
#: Parameters that change the sampling distribution: a rollout's creator may pin them (``metadata.sampling``).
PINNABLE = frozenset({"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                      "repetition_penalty", "seed"})


@dataclass(slots=True)
class Plan:
    """The engine request for one harness request, plus what to give back and record."""

    upstream: dict[str, Any]
    sampling: dict[str, Any]
    stream: bool
    want_logprobs: bool
    want_token_ids: bool
    #: The completion limit sent to the engine; None: none sent, the engine gives the room its context leaves.
    max_tokens: int | None
    n: int
    #: upstream["model"] names this call's policy (its adapter): engines must not replace it.
    pinned_model: bool = False
    #: The max_tokens the harness asked for (None: it asked for none).
    asked: int | None = None


def plan(api: ApiKind, body: dict, config: GatewayConfig, engine_model: str | None,
         tokens_left: int, pinned: dict[str, Any] | None = None, context_window: int | None = None) -> Plan:
    """Build the engine request: limits applied, pinned sampling forced, token ids and logprobs on.

    A call gets the ``max_tokens`` it asked for, lowered only by a configured cap
    (``limits.max_tokens_per_call``, none by default) or what is left of the rollout's budget; the engine's
    context refusal lowers it to the room left (``engine_hop.fit_context``). A call that asks for nothing
    gets the room its context leaves (no ``max_tokens`` sent, as OpenAI's API and vLLM mean it) unless the
    budget left is smaller than the engines' ``context_window``. Whatever lowered a limit is recorded:
    ``max_tokens_requested`` and ``max_tokens_clamp`` (``cap``, ``budget`` or ``context``).
    """
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
    max_tokens, clamp = asked, None
    cap = limits.max_tokens_per_call
    if cap is not None and (max_tokens is None or cap < max_tokens):
        max_tokens, clamp = cap, "cap"
    # the budget binds below the limit, or (nothing asked) below a context it may not fit or is unknown
    bound = max_tokens if max_tokens is not None else context_window
    if bound is None or budget_each < bound:
        max_tokens, clamp = budget_each, "budget"
    up = dict(body)
    up.pop("max_completion_tokens", None)
    up.pop("max_tokens", None)
    if max_tokens is not None:
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
        sampling["max_tokens_requested"], sampling["max_tokens_clamp"] = asked, clamp
    return Plan(upstream=up, sampling=sampling, stream=bool(body.get("stream")),
                want_logprobs=want_logprobs, want_token_ids=bool(body.get("return_token_ids")),
                max_tokens=max_tokens, n=n, asked=asked)


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


def token_versions(resp: dict) -> list[list[list[int]]]:
    """Per choice (index order), who sampled each token as run-length ``[[policy version, tokens], ...]``,
    where the engine says (the embedded engine does; a generation may span a weight update)."""
    choices = sorted(resp.get("choices") or (), key=lambda c: c.get("index", 0))
    return [list(ch.get("token_versions") or []) for ch in choices]
