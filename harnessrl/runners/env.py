"""The environment an attempt (or a verifier) sees: a minimal inherited base plus explicit additions.

Nothing is inherited by default except harmless names (PATH, HOME, locale...), so a secret in the
controller's environment cannot leak into a harness. Precedence, lowest first: inherited names,
configured extras, task input variables, the rollout's identity (which nothing may override).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

TASK_INPUT_VAR = "HARNESSRL_TASK_INPUT"
TASK_INPUT_FILE_VAR = "HARNESSRL_TASK_INPUT_FILE"
TASK_VAR_PREFIX = "HARNESSRL_TASK_"
_RESERVED_TASK_VARS = {TASK_INPUT_VAR, TASK_INPUT_FILE_VAR, "HARNESSRL_TASK_ID"}


def base_env(inherit: Iterable[str], *, prepend_python_bin: bool = True) -> dict[str, str]:
    """The inherited names that are set, with the running interpreter's bin dir first on PATH if asked."""
    env = {name: os.environ[name] for name in inherit if name in os.environ}
    if prepend_python_bin:
        bin_dir = os.path.dirname(sys.executable)
        parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
        env["PATH"] = os.pathsep.join([bin_dir, *parts])
    return env


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def task_input_env(task_input: Mapping[str, Any], max_value_bytes: int) -> dict[str, str]:
    """``HARNESSRL_TASK_INPUT`` (the whole input as JSON) and ``HARNESSRL_TASK_<KEY>`` per top-level key.

    Keys are upper-cased with non-alphanumerics turned into ``_``; strings pass as they are, other values
    as JSON. Values over ``max_value_bytes`` or containing NUL are left out (the input file has them):
    an oversized environment makes ``exec`` fail with E2BIG, which would look like an infra failure.
    """
    env: dict[str, str] = {}
    candidates = [(TASK_INPUT_VAR, json.dumps(dict(task_input), ensure_ascii=False))]
    for key, value in task_input.items():
        name = TASK_VAR_PREFIX + re.sub(r"[^A-Z0-9]", "_", str(key).upper())
        if name in _RESERVED_TASK_VARS or name == TASK_VAR_PREFIX:
            logger.warning("task input key %r clashes with %s; only in the JSON input", key, name)
            continue
        candidates.append((name, _env_value(value)))
    for name, text in candidates:
        if "\x00" in text or len(text.encode()) > max_value_bytes:
            logger.info("%s left out of the environment (too long or contains NUL); see the input file", name)
            continue
        if name in env:
            logger.warning("task input keys collide on %s; keeping the first", name)
            continue
        env[name] = text
    return env
