"""The OpenHands SDK agent (PyPI openhands-sdk + openhands-tools, unmodified, in its own Python >= 3.12 venv)
through a default gateway: a scripted engine makes it read, edit and test greet.py of a tiny git repository
with its default tools (file_editor, terminal) and end with its finish tool; checks in
``_harness.edit_and_train``. The sandbox shows what the example's config lists: the venv and the interpreter
it links to. Outside the sandbox, the same run asks for no connection but the gateway (as test_offline.py);
in render mode ``gateway`` the edit lands too and the calls stay extended (as test_gateway_render.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.config import load_config

from ._harness import EXAMPLES, Stack, check_recorded, edit_and_train, require_openhands
from ._scripts import openhands
from .test_gateway_render import render_stack  # noqa: F401  (a fixture)
from .test_offline import proxy_log  # noqa: F401  (a fixture)

require_openhands()


def example_read_only() -> tuple[Path, ...]:
    """What the example's config shows the sandbox: the venv and its interpreter (resolved when loaded)."""
    config = load_config(EXAMPLES / "openhands" / "config.toml")
    return tuple(Path(p) for p in config.runner.sandbox_read_only)


@pytest.mark.slow
def test_openhands_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, _ = edit_and_train(stack, "openhands", openhands, tmp_path, agent_calls=4, read_only=example_read_only())
    assert not stack.engine.side_requests  # every call is the agent's: no title or summary calls
    tools = {t["function"]["name"] for t in good.calls[0].request["tools"]}
    assert {"terminal", "file_editor", "finish"} <= tools, tools


@pytest.mark.slow
def test_openhands_asks_for_no_connection_but_the_gateway(stack: Stack, proxy_log: tuple[str, list[str]]) -> None:  # noqa: F811
    url, seen = proxy_log
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    a = stack.attempt("openhands", openhands('return f"Hello, {name}!"'), "openhands-offline", env=env,
                      sandbox=False)
    assert a.rollout.exit_code == 0 and a.rewards["verifier"] == 1.0, a.logs
    assert seen == [], seen


@pytest.mark.slow
def test_openhands_in_gateway_render_mode(render_stack: Stack) -> None:  # noqa: F811
    fixed = 'return f"Hello, {name}!"'
    a = render_stack.attempt("openhands", openhands(fixed), "openhands-render", read_only=example_read_only())
    assert a.rollout.exit_code == 0 and a.rewards["verifier"] == 1.0, a.logs
    assert fixed in (a.workdir / "greet.py").read_text(), a.logs
    check_recorded(a.calls)
    assert len(a.calls) == 4 and min(len(c.prompt_token_ids) for c in a.calls) > 8000  # ~23k: its real prompt
    fidelity = [(c.fidelity.value if c.fidelity else None, c.fidelity_reason) for c in a.calls]
    assert [f for f, _ in fidelity[1:]] == ["extended"] * 3, fidelity
