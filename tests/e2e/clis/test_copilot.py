"""GitHub Copilot CLI (npm @github/copilot, unmodified, `copilot -p --allow-all-tools`) through a gateway with
the example's one setting, over chat completions (streamed), as its bring-your-own-key provider
(COPILOT_PROVIDER_BASE_URL, COPILOT_OFFLINE): a scripted engine makes it view, edit and test greet.py of a
tiny git repository with its own tools (view, edit, bash); checks in ``_harness.edit_and_train``. Copilot asks
for temperature 0 on every call, so the example pins sampling (greedy calls would not train).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.types import ApiKind

from ._harness import EXAMPLES, Stack, edit_and_train, require_cli
from ._scripts import copilot

require_cli("copilot")

CONFIG = load_config(EXAMPLES / "copilot" / "config.toml")


@pytest.fixture
def copilot_stack(tmp_path: Path) -> Iterator[Stack]:
    """The default gateway plus the example's ``pinned_sampling``."""
    s = Stack(tmp_path, pinned_sampling=CONFIG.gateway.pinned_sampling)
    yield s
    s.close()


@pytest.mark.slow
def test_copilot_edits_a_repository_and_trains(copilot_stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(copilot_stack, "copilot", copilot, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    assert all(c.request.get("stream") for c in good.calls)
    assert {c.request["temperature"] for c in good.calls} == {0}  # Copilot's own, overridden by the pin:
    assert {c.sampling["temperature"] for c in good.calls} == {1.0}
    assert not copilot_stack.engine.side_requests  # every call is the agent's
