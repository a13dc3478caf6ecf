"""Claude Code (npm @anthropic-ai/claude-code, unmodified, `claude -p`) through a default gateway, over
the Anthropic Messages API: a scripted engine makes it read, edit and test greet.py of a tiny git
repository with its own tools (Read, Edit, Bash); checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._harness import Stack, edit_and_train, require_cli

require_cli("claude")


def script(new: str) -> list[dict]:
    return [
        {"tool": "Read", "arguments": {"file_path": "{cwd}/greet.py"}},
        {"tool": "Edit", "arguments": {"file_path": "{cwd}/greet.py", "old_string": 'return "Hello " + name',
                                       "new_string": new}},
        {"tool": "Bash", "arguments": {"command": "python3 -m unittest", "description": "Run the tests"}},
        {"text": "Done: greet.py edited and the test run."},
    ]


@pytest.mark.slow
def test_claude_code_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    edit_and_train(stack, "claude-code", script, tmp_path, agent_calls=4)
