"""Pi's coding agent (npm @mariozechner/pi-coding-agent, unmodified, `pi -p`) through a default gateway, over
chat completions (streamed), as a custom provider of its models.json: a scripted engine makes it read, edit and
test greet.py of a tiny git repository with its own tools (read, edit, bash); checks in
``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import pi

require_cli("pi")


@pytest.mark.slow
def test_pi_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "pi", pi, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    assert all(c.request.get("stream") for c in good.calls)
    assert not stack.engine.side_requests  # every call is the agent's: Pi makes no title or summary call
