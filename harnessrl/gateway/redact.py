"""Redaction of secrets in what the gateway stores (never in what it forwards).

One combined regex walks every string of a request/response tree; matches become ``[REDACTED]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

REPLACEMENT = "[REDACTED]"


class Redactor:
    def __init__(self, patterns: Sequence[str]) -> None:
        self._re = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` with secrets replaced (the input itself is returned when nothing matched)."""
        if self._re is None:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._re.sub(REPLACEMENT, value) if self._re.search(value) else value  # type: ignore[union-attr]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value
