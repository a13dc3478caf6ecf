"""The OpenAI completions API: the engine's own dialect (a text or token-id prompt), validated only.

Its answers are relayed like chat's (``chat.Passthrough``): the same chunk stream, other fields.
"""

from __future__ import annotations

from typing import Any

from harnessrl.gateway.apis.base import expect_dict, validate_common
from harnessrl.gateway.errors import BadRequest


def validate(body: Any) -> None:
    """Refuse a malformed completions body with a 400 that says which field is wrong."""
    body = expect_dict(body, "the request body")
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str | list):
        p = p[0]
    ok = isinstance(p, str) or (isinstance(p, list) and p and all(type(t) is int and t >= 0 for t in p))
    if not ok:
        raise BadRequest("'prompt' is required: one string or one list of token ids (no batches)")
    lp = body.get("logprobs")
    if lp is not None and (type(lp) is not int or lp < 0):
        raise BadRequest("'logprobs' must be a non-negative integer")
    validate_common(body)
