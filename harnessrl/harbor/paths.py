"""Harbor's container paths mapped to folders on the host, in the text of instructions, tests and solutions.

A Harbor task is written for a container: the agent works in the Dockerfile's ``WORKDIR`` (often ``/app``),
tests are uploaded to ``/tests``, the reward goes to ``/logs/verifier/reward.txt``. Without the container those
absolute paths name nothing (or the wrong thing) on the host, so the copies harnessrl runs have them
rewritten: a path counts only as a whole component (``/app`` in ``cd /app`` or ``/app/x.py``, never in
``/apple`` or ``$HOME/app``). Stdlib only: the verifier imports it inside the sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

#: Where Harbor mounts or uploads things inside its container (``EnvironmentPaths`` in Harbor).
LOGS, VERIFIER_LOGS, AGENT_LOGS, ARTIFACTS = "/logs", "/logs/verifier", "/logs/agent", "/logs/artifacts"
TESTS, SOLUTION = "/tests", "/solution"
_MAX_REWRITE_BYTES = 4 << 20


def _pattern(prefixes: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
    # not inside a longer word or path on the left; on the right a separator, a quote, the end, or a full stop
    return re.compile(rf"(?<![\w.~/-])({alternatives})(?![\w-]|\.\w)")


def rewrite_paths(text: str, mapping: Mapping[str, str]) -> tuple[str, int]:
    """``text`` with each container path of ``mapping`` (longest first) replaced; and how many were."""
    usable = {k.rstrip("/"): v for k, v in mapping.items() if k.strip("/")}
    if not usable:
        return text, 0
    return _pattern(list(usable)).subn(lambda m: usable[m.group(1)], text)


def relative_instruction(text: str, workdir: str | None) -> tuple[str, int]:
    """The instruction with paths under the task's ``WORKDIR`` made relative to the harness's cwd (which is
    the workspace): ``/app/out.txt`` becomes ``./out.txt`` and ``/app`` alone ``.``."""
    if not workdir or not workdir.strip("/"):
        return text, 0
    return _pattern([workdir.rstrip("/")]).subn(lambda m: ".", text)


def rewrite_tree(root: Path, mapping: Mapping[str, str]) -> int:
    """Rewrite every text file under ``root`` in place (binary and very large files are left as they are);
    returns the number of paths replaced."""
    total = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_REWRITE_BYTES:
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        new, count = rewrite_paths(text, mapping)
        if count:
            path.write_bytes(new.encode("utf-8"))  # keeps the file's mode (test.sh stays executable)
            total += count
    return total
