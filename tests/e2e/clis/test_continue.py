"""Continue's CLI (npm @continuedev/cli, unmodified, `cn -p --auto` with a local config file) through a
default gateway, over chat completions (streamed): a scripted engine makes it read, edit and test greet.py of
a tiny git repository with its own tools (Read, Edit, Bash); checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import continue_cli

require_cli("cn")


@pytest.mark.slow
def test_continue_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "continue", continue_cli, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    assert not stack.engine.side_requests  # every call is the agent's
