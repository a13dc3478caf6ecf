"""Codex CLI (npm @openai/codex, unmodified, `codex exec`) through a default gateway, over the Responses
API: a scripted engine makes it read, patch and test greet.py of a tiny git repository with its own
tools (``exec_command``, and ``apply_patch`` run through it, which Codex intercepts and applies itself);
checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import codex

require_cli("codex")


@pytest.mark.slow
def test_codex_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "codex", codex, tmp_path, agent_calls=4)
    # Codex applied the patch itself: its own success message came back as the tool's output
    assert "Success. Updated the following files" in str(good.calls[-1].request["input"])
