"""OpenCode (npm opencode-ai, unmodified, `opencode run`) through a default gateway: a scripted engine
makes it read, edit and test greet.py of a tiny git repository with its own tools (read, edit, bash);
checks in ``_harness.edit_and_train``. OpenCode also asks for a session title (a side request without
tools, answered and recorded beside the agent's calls).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import opencode

require_cli("opencode")


@pytest.mark.slow
def test_opencode_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    edit_and_train(stack, "opencode", opencode, tmp_path, agent_calls=4)
    assert stack.engine.side_requests  # the title agent's request
