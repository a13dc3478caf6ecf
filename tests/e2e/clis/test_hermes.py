"""Hermes Agent (PyPI hermes-agent, unmodified, `hermes -z`, in its own venv) through a default gateway, over
chat completions (streamed), as its custom endpoint (``provider: custom`` in ~/.hermes/config.yaml): a
scripted engine makes it read, patch and test greet.py of a tiny git repository with its own tools
(read_file, patch, terminal), then answer (twice more: Hermes asks once and again whether it verified the
edit); the checks of ``_harness.edit_and_train``, after Hermes' probes: on a loopback
endpoint it first asks which local server it is (LM Studio's /api/v1/models, Ollama's /api/tags, llama.cpp's
/props, ...), GETs the gateway does not serve: each is refused 404 and recorded so, never trained. The same
run outside the sandbox asks for no connection but the gateway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.types import ApiKind, Call, Rollout

from ._harness import EXAMPLES, ROOT, Stack, check_recorded, train_one_step
from ._scripts import hermes
from .test_offline import proxy_log  # noqa: F401  (a fixture)

HERMES_VENV = ROOT / ".venv-hermes"  # scripts/hermes.sh; its base-python links to the interpreter
if not (HERMES_VENV / "pins").exists():
    pytest.skip("Hermes Agent is not installed: run `bash scripts/hermes.sh` (hermes-agent into .venv-hermes, "
                "Python 3.11-3.13)", allow_module_level=True)

CONFIG = load_config(EXAMPLES / "hermes" / "config.toml")
READ_ONLY = tuple(Path(p) for p in CONFIG.runner.sandbox_read_only)  # the venv and its interpreter
RIGHT, WRONG = 'return f"Hello, {name}!"', 'return f"Hello {name}"'


def served(calls: list[Call]) -> list[Call]:
    """The calls but Hermes' local-server probes, each checked to be a refused GET of an unserved route."""
    probes = [c for c in calls if c.status.value == "refused"]
    assert all("404 unknown_route: no route: GET " in (c.error or "") for c in probes), [c.error for c in probes]
    return [c for c in calls if c not in probes]


def attempt(stack: Stack, new: str) -> Rollout:
    """One attempt that writes ``new`` into greet.py, its served calls checked as every CLI's are."""
    a = stack.attempt("hermes", hermes(new), "hermes-group", read_only=READ_ONLY)
    assert a.rollout.exit_code == 0, a.logs
    assert new in (a.workdir / "greet.py").read_text(), a.logs
    assert a.rewards["verifier"] == (1.0 if new == RIGHT else 0.0), a.logs
    calls = served(a.calls)
    check_recorded(calls)
    assert len(calls) == 6 and all(c.request.get("tools") for c in calls), [(c.index, c.api) for c in calls]
    # Its verify-on-stop: an edit without a test command it knows (pytest, make test, ...) in the run gets
    # its answer sent back twice with a nudge to verify (the script answers the same) before it stops.
    nudges = [str(c.request["messages"][-1]["content"]) for c in calls[4:]]
    assert all(n.startswith("[System: You edited code") for n in nudges), nudges
    assert {c.api for c in calls} == {ApiKind.CHAT} and {c.requested_model for c in calls} == {"policy"}
    assert all(c.request.get("stream") for c in calls)
    fidelity = [(c.fidelity.value if c.fidelity else None, c.fidelity_reason) for c in calls]
    assert [f for f, _ in fidelity[1:]] == ["extended"] * 5, fidelity  # its history sent back as it got it
    return a.rollout


@pytest.mark.slow
def test_hermes_edits_a_repository_and_trains(stack: Stack, tmp_path: Path) -> None:
    good, bad = attempt(stack, RIGHT), attempt(stack, WRONG)
    assert not stack.engine.side_requests  # every call is the agent's: no title or memory call in -z mode
    metrics = train_one_step(stack.store, [good, bad], tmp_path)
    assert metrics["advantages"][good.id] > 0 > metrics["advantages"][bad.id], metrics["advantages"]
    assert metrics["samples/rollouts"] == 2, metrics
    assert metrics["grad_norm"] > 0 and metrics["lora_b_max"] > 0, metrics


@pytest.mark.slow
def test_hermes_asks_for_no_connection_but_the_gateway(stack: Stack,
                                                       proxy_log: tuple[str, list[str]]) -> None:  # noqa: F811
    url, seen = proxy_log
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    a = stack.attempt("hermes", hermes(RIGHT), "hermes-offline", env=env, sandbox=False)
    assert a.rollout.exit_code == 0 and a.rewards["verifier"] == 1.0, a.logs
    assert seen == [], seen
