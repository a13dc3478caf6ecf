"""Redaction of secrets in what the gateway stores (never in what it forwards).

One combined regex walks every string of a request/response tree; matches become ``[REDACTED]``. A
search over the tree's JSON text comes first, so that the common case (no secret) costs one C-speed scan
instead of a Python walk. Patterns are therefore also matched against JSON text: one that must match a
quote, backslash or control character should accept its JSON-escaped form too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

REPLACEMENT = "[REDACTED]"


class Redactor:
    def __init__(self, patterns: Sequence[str]) -> None:
        joined = "|".join(f"(?:{p})" for p in patterns)
        self._re = re.compile(joined) if patterns else None
        self._re_json = re.compile(joined.encode()) if patterns else None

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` with secrets replaced (the input itself is returned when nothing matched)."""
        if self._re is None:
            return value
        if isinstance(value, dict | list):
            try:
                if not self._re_json.search(orjson.dumps(value)):  # type: ignore[union-attr]
                    return value
            except TypeError:
                pass  # not JSON-serializable: walk it
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._re.sub(REPLACEMENT, value) if self._re.search(value) else value  # type: ignore[union-attr]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value
