"""Redaction of secrets in what the gateway stores (never in what it forwards).

One combined regex walks every string of a request/response tree; matches become ``[REDACTED]``. A
search over the tree's JSON text comes first, so that the common case (no secret) costs one C-speed scan
instead of a Python walk. Patterns are therefore also matched against JSON text: one that must match a
quote, backslash or control character should accept its JSON-escaped form too.

What the gateway records is redacted when it is written (``Recorder``: text, then token IDs with
``redact_tokens``). What a harness or runner writes about a rollout (its input, logs, error, metadata)
goes to the store from the controller as it is, and every reader -- admin API, dashboard,
``harnessrl show``, export -- passes it through ``redact_rollout`` first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import orjson

from harnessrl.gateway.config import DEFAULT_REDACTIONS
from harnessrl.types import Rollout, Run

REPLACEMENT = "[REDACTED]"


class Redactor:
    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = list(patterns)
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


def redactor_for(runs: Sequence[Run], extra: Sequence[str] = ()) -> Redactor:
    """The gateway's default patterns, every run's ``[gateway] redact_patterns``, and ``extra``."""
    patterns = list(DEFAULT_REDACTIONS)
    for run in runs:
        gw = run.config.get("gateway") if isinstance(run.config, dict) else None
        for p in (gw.get("redact_patterns") if isinstance(gw, dict) else None) or []:
            if isinstance(p, str) and p not in patterns:
                patterns.append(p)
    patterns += [p for p in extra if p not in patterns]
    return Redactor(patterns)


def redact_rollout(rollout: Rollout, redactor: Redactor) -> Rollout:
    """The rollout with secrets out of what its harness and runner wrote: input, metadata, error, logs."""
    return dataclasses.replace(rollout, input=redactor(rollout.input), metadata=redactor(rollout.metadata),
                               error=redactor(rollout.error) if rollout.error else rollout.error,
                               logs=redactor(rollout.logs) if rollout.logs else rollout.logs)
