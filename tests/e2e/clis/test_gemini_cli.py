"""The Gemini CLI (npm @google/gemini-cli, unmodified, `gemini -p`) through a default gateway, speaking
Google's Gemini API (streamGenerateContent with alt=sse, function calls and responses): a scripted engine
makes it read, edit and test greet.py of a tiny git repository with its own tools (read_file, replace,
run_shell_command); checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import gemini_cli

require_cli("gemini")


@pytest.mark.slow
def test_gemini_cli_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "gemini-cli", gemini_cli, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.GEMINI}
    assert {c.requested_model for c in good.calls} == {"gemini-2.5-pro"}  # run.sh's -m: no routing call
