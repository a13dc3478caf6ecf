"""Kilo's CLI (npm @kilocode/cli, unmodified, `kilo run --auto`; built on OpenCode) through a default gateway,
over chat completions (streamed): a scripted engine makes it read, edit and test greet.py of a tiny git
repository with its own tools (OpenCode's read, edit, bash); checks in ``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import opencode

require_cli("kilo")


@pytest.mark.slow
def test_kilo_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "kilo", opencode, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    assert {c.request.get("max_tokens") for c in good.calls} == {32000}
    assert not stack.engine.side_requests  # every call is the agent's: no title call (OpenCode makes one)
