"""The Cline CLI (npm cline, unmodified, `cline "$PROMPT"` after `cline auth -p openai`) through a default
gateway, over chat completions (streamed, native tool calls): a scripted engine makes it read, edit and test
greet.py of a tiny git repository with its own tools (read_files, editor, run_commands); checks in
``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import cline

require_cli("cline")


@pytest.mark.slow
def test_cline_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "cline", cline, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    assert not stack.engine.side_requests  # every call is the agent's
    tools = {t["function"]["name"] for t in good.calls[0].request["tools"]}
    assert {"read_files", "editor", "run_commands"} <= tools, tools
