"""The attempt environment as the official clients read it (slow-ish: imports both SDKs in a subprocess)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from harnessrl.runners import RunnerConfig, make_attempt_spec
from harnessrl.runners.local import LocalRunner
from harnessrl.types import RolloutStatus

GW = "http://127.0.0.1:9999"


@pytest.mark.skipif(
    not (importlib.util.find_spec("openai") and importlib.util.find_spec("anthropic")),
    reason="needs the openai and anthropic clients (test extra)",
)
def test_official_clients_pick_up_the_rollout_endpoints(tmp_path: Path) -> None:
    """An unmodified harness configures openai/anthropic from the environment alone."""
    code = """
    import anthropic, openai
    o, a = openai.OpenAI(), anthropic.Anthropic()
    print(o.base_url, o.api_key)
    print(a.base_url, a.api_key)
    """
    (tmp_path / "clients.py").write_text(textwrap.dedent(code))
    config = RunnerConfig(command=[sys.executable, str(tmp_path / "clients.py")], timeout_s=120)
    spec = make_attempt_spec(
        config, rollout_id="c9", task_id="t", task_input={}, gateway_url=GW, api_key="key-c9"
    )
    result = asyncio.run(LocalRunner(config, tmp_path / "attempts").run(spec))
    assert result.status is RolloutStatus.SUCCEEDED, result.stderr
    openai_line, anthropic_line = result.stdout.splitlines()
    assert openai_line == f"{GW}/r/c9/v1/ key-c9"
    assert anthropic_line == f"{GW}/r/c9/ key-c9"  # no /v1: the client adds /v1/messages itself
