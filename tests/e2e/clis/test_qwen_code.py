"""Qwen Code (npm @qwen-code/qwen-code, unmodified, `qwen "$PROMPT" --auth-type openai --yolo`) through a
default gateway, over chat completions (streamed): a scripted engine makes it read, edit and test greet.py
of a tiny git repository with its own tools (read_file, edit, run_shell_command); checks in
``_harness.edit_and_train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.types import ApiKind

from ._harness import Stack, edit_and_train, require_cli
from ._scripts import qwen_code

require_cli("qwen")


@pytest.mark.slow
def test_qwen_code_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "qwen-code", qwen_code, tmp_path, agent_calls=4)
    assert {c.api for c in good.calls} == {ApiKind.CHAT}
    assert {c.requested_model for c in good.calls} == {"qwen3-coder-plus"}  # run.sh's default name
