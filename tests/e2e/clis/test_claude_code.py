"""Claude Code (npm @anthropic-ai/claude-code, unmodified, `claude -p`) through a default gateway, over
the Anthropic Messages API: a scripted engine makes it read, edit and test greet.py of a tiny git
repository with its own tools (Read, Edit, Bash); checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import claude_code

require_cli("claude")


@pytest.mark.slow
def test_claude_code_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    edit_and_train(stack, "claude-code", claude_code, tmp_path, agent_calls=4)
