"""The eval script of a record that brings none: SWE-bench's classic layout, for any repository.

swebench 5.x no longer writes eval scripts: each instance of its datasets carries its own ``eval_script``
(and ``log_parser``, ``eval_type``, ``image``), and ``make_test_spec`` only reads them. A record without one
(an older SWE-bench row, a SWE-bench-style set of one's own) gets this script, in the shape swebench's
harness used to write and its grader still expects: reset the test files to the base commit, apply the
``test_patch``, run the tests between the ``>>>>> Start/End Test Output`` markers (``set -x`` prints them),
reset the test files again. ``make_test_spec`` then adds its own exit-status line, as for any instance.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import unidiff

#: swebench's here-document delimiter for the test patch (its eval scripts use the same one).
HEREDOC_DELIMITER = "EOF_114329324912"
#: The test runner of a record that names none: pytest with a line per test (what ``parse_log_pytest`` reads).
DEFAULT_TEST_CMD = "pytest -rA"


class TestPatchError(ValueError):
    """The ``test_patch`` is not a unified diff that names at least one file."""


def patched_files(test_patch: str) -> list[unidiff.PatchedFile]:
    """The files the test patch touches (``unidiff``, a swebench requirement, parses the diff)."""
    import unidiff

    try:
        files = list(unidiff.PatchSet(test_patch))
    except unidiff.UnidiffParseError as exc:
        raise TestPatchError(f"test_patch is not a unified diff ({exc})") from None
    if not files:
        raise TestPatchError("test_patch names no file")
    return files


def test_directives(test_patch: str) -> list[str]:
    """The test files to run: what the test patch adds or changes, minus data files (swebench's
    ``NON_TEST_EXTS``, as its harness chose them for pytest repositories)."""
    from swebench.harness.constants import NON_TEST_EXTS

    return [f.path for f in patched_files(test_patch)
            if not f.is_removed_file and not any(f.path.endswith(ext) for ext in NON_TEST_EXTS)]


def reset_test_files(base_commit: str, test_patch: str) -> str:
    """Shell lines that put each file of the test patch back as it was at ``base_commit``: a file the
    patch creates is removed (so an agent's file of that name cannot block it), any other is checked out.

    Why per file: ``git checkout <commit> a b`` changes nothing when one path is missing from the commit.
    """
    lines = []
    for f in patched_files(test_patch):
        path = shlex.quote(f.path)
        if f.is_added_file:
            lines.append(f"rm -rf -- {path}")
        else:
            lines.append(f"git checkout {shlex.quote(base_commit)} -- {path}")
    return "\n".join(lines)


def make_eval_script(*, base_commit: str, test_patch: str, workdir: str, test_cmd: str | None = None) -> str:
    """The eval script of a record without one. ``test_cmd``: the runner (default ``pytest -rA``); the
    test patch's test files follow it, as swebench's harness ran them."""
    if HEREDOC_DELIMITER in test_patch:
        raise TestPatchError(f"test_patch contains the here-document delimiter {HEREDOC_DELIMITER}")
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    command = " ".join([test_cmd or DEFAULT_TEST_CMD, *map(shlex.quote, test_directives(test_patch))])
    reset = reset_test_files(base_commit, test_patch)
    patch = test_patch if test_patch.endswith("\n") else test_patch + "\n"
    return "\n".join([
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {shlex.quote(workdir)}",
        f"git config --global --add safe.directory {shlex.quote(workdir)}",
        "git status",
        f"git -c core.fileMode=false diff {shlex.quote(base_commit)}",
        reset,
        f"git apply -v - <<'{HEREDOC_DELIMITER}'\n{patch}{HEREDOC_DELIMITER}",
        f": '{START_TEST_OUTPUT}'",
        command,
        f": '{END_TEST_OUTPUT}'",
        reset,
    ]) + "\n"
