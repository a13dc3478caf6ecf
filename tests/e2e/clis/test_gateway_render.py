"""The tool-calling CLIs (``_scripts.SCRIPTS``) through the gateway in render mode ``gateway``, the default
of ``harnessrl train`` and ``collect``: the gateway applies the chat template itself (the tiny model's
ChatML + Hermes tools) and sends token ids to the engine, which answers with scripted token ids. The CLIs'
5.5k-35k-token prompts (system prompt and tool schemas in the tiny tokenizer) are rendered, the Hermes tool
calls parsed back into each API's own tool use, and every agent call after the first extends the one before
token for token. No training here: ``test_<cli>.py`` train on the compact prompts of render mode ``engine``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._harness import CLIS_BIN, Stack, check_recorded
from ._scripts import BINARIES, SCRIPTS


@pytest.fixture
def render_stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path, render_mode="gateway")
    yield s
    s.close()


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(SCRIPTS))
def test_cli_in_gateway_render_mode(example: str, render_stack: Stack) -> None:
    if not (CLIS_BIN / BINARIES[example]).exists():
        pytest.skip(f"{BINARIES[example]} is not installed: run `bash scripts/clis.sh`")
    fixed = 'return f"Hello, {name}!"'
    a = render_stack.attempt(example, SCRIPTS[example](fixed), f"{example}-render")
    assert a.rollout.exit_code == 0, a.logs
    assert fixed in (a.workdir / "greet.py").read_text(), a.logs
    assert a.rewards["verifier"] == 1.0, a.logs
    check_recorded(a.calls)
    agent = [c for c in a.calls if c.request.get("tools")]
    assert len(agent) == 4 and min(len(c.prompt_token_ids) for c in agent) > 4000  # the real one (Continue's ~5.5k)
    fidelity = [(c.fidelity.value if c.fidelity else None, c.fidelity_reason) for c in agent]
    assert [f for f, _ in fidelity[1:]] == ["extended"] * 3, fidelity
