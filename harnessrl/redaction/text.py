"""Redaction of secrets in what is kept (never in what the gateway forwards).

One combined regex walks every string of a request/response tree; matches become ``[REDACTED]``. A
search over the tree's JSON text comes first, so that the common case (no secret) costs one C-speed scan
instead of a Python walk. Patterns are therefore also matched against JSON text: one that must match a
quote, backslash or control character should accept its JSON-escaped form too.

What the gateway records is redacted when it is written (``gateway/recorder.py``: text, then token IDs with
``tokens.py``). What a harness or runner writes about a rollout (its logs, its error) is redacted by
``close_rollout`` before the write (``rewards/score.py``), so the database file holds no secret; what came
in before that (a task's input, metadata) is redacted by every reader -- admin API, dashboard,
``harnessrl show``, export -- with ``redact_rollout``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import orjson

from harnessrl.types import Rollout, Run

REPLACEMENT = "[REDACTED]"

#: What every store, judge and reader redacts unless told otherwise (``[gateway] redact_patterns``).
DEFAULT_REDACTIONS = [
    r"sk-[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic style keys
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"xox[baprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
]


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

    def findall(self, *values: Any) -> set[str]:
        """The texts that match in ``values`` (JSON-escaped where they sat in a dict or list)."""
        if self._re is None:
            return set()
        found: set[str] = set()
        for value in values:
            if value is None:
                continue
            if isinstance(value, str):
                found.update(m.group() for m in self._re.finditer(value))
                continue
            try:
                data = orjson.dumps(value)
            except TypeError:
                continue
            found.update(m.group().decode(errors="replace") for m in self._re_json.finditer(data))  # type: ignore[union-attr]
        return {f for f in found if f}

    def with_known(self, secrets: Sequence[str] | set[str]) -> Redactor:
        """This redactor plus ``known_patterns(secrets)``: a key found once is found again when cut short."""
        return Redactor(self.patterns + [p for p in known_patterns(secrets) if p not in self.patterns])

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


#: A known secret is also found by its first this many characters (a key cut short by max_tokens).
KNOWN_PREFIX = 12


def known_patterns(secrets: Sequence[str] | set[str]) -> list[str]:
    """Regexes for secrets already found in a rollout: each one, and each of its prefixes of at least
    ``KNOWN_PREFIX`` characters (what a model writes when its answer is cut off mid-key)."""
    out = []
    for secret in sorted(secrets):
        if len(secret) <= KNOWN_PREFIX:
            out.append(re.escape(secret))
            continue
        tail = ""
        for ch in reversed(secret[KNOWN_PREFIX:]):
            tail = f"(?:{re.escape(ch)}{tail})?"
        out.append(re.escape(secret[:KNOWN_PREFIX]) + tail)
    return out
