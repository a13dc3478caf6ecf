"""aider (PyPI aider-chat, unmodified, `aider --message`, in its own Python 3.12 venv) through a default
gateway, over chat completions (streamed, no tools: aider edits by the text of its answers). The task's
prompt names greet.py, so aider adds it to the chat; a scripted engine answers in aider's default edit format
for an unknown model (``whole``: the file's path, then all of it) with a wrong fix; aider writes and commits
it (a commit-message call of its own) and runs the test (``--auto-test``), whose failures go back to the
model; the second answer fixes it (or gives up). The checks of ``_harness.edit_and_train``, but for the
fidelity: aider rebuilds its context every turn (the files' new contents), so its calls are ``rerendered``.
The same run outside the sandbox asks for no connection but the gateway.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessrl.config import load_config
from harnessrl.types import ApiKind, Call

from ._harness import EXAMPLES, ROOT, Stack, check_recorded, require_aider, train_one_step
from .test_offline import proxy_log  # noqa: F401  (a fixture)

sys.path.insert(0, str(ROOT / "tests"))
from fakes.cli_engine import CliTextScriptEngine  # noqa: E402

require_aider()

MARKER = "Act as an expert software developer."  # aider's system prompt (its commit-message prompt differs)
RIGHT, WRONG = 'return f"Hello, {name}!"', 'return f"Hello {name}"'


def whole(line: str) -> dict:
    """An answer in aider's default edit format for an unknown model, ``whole``: the file's path, then all of it."""
    return {"text": f'greet.py\n```python\ndef greet(name):\n    """The greeting shown to a user."""\n    {line}\n```\n'}


def script(last: str) -> list[dict]:
    """A wrong first edit (the test fails and aider sends the failures back), then ``last``."""
    return [whole(WRONG), whole(RIGHT) if last == RIGHT else {"text": "I could not fix it."}]


CONFIG = load_config(EXAMPLES / "aider" / "config.toml")
READ_ONLY = tuple(Path(p) for p in CONFIG.runner.sandbox_read_only)  # the venv and its interpreter


def make_stack(tmp: Path, **gateway: Any) -> Stack:
    return Stack(tmp, engine=CliTextScriptEngine([{"text": "done"}], MARKER, side_text="Fix greet", model="policy"),
                 **gateway)


@pytest.fixture
def aider_stack(tmp_path: Path) -> Iterator[Stack]:
    """The default gateway plus the example's one setting: ``pinned_sampling`` (aider asks for greedy calls)."""
    s = make_stack(tmp_path, pinned_sampling=CONFIG.gateway.pinned_sampling)
    yield s
    s.close()


@pytest.fixture
def default_stack(tmp_path: Path) -> Iterator[Stack]:
    s = make_stack(tmp_path)
    yield s
    s.close()


def agent_calls(calls: list[Call]) -> list[Call]:
    return [c for c in calls if MARKER in str(c.request["messages"][0]["content"])]


@pytest.mark.slow
def test_aider_edits_a_repository_and_trains(aider_stack: Stack, tmp_path: Path) -> None:
    stack = aider_stack
    good = stack.attempt("aider", script(RIGHT), "aider-group", read_only=READ_ONLY)
    assert good.rollout.exit_code == 0, good.logs
    assert RIGHT in (good.workdir / "greet.py").read_text(), good.logs
    assert good.rewards["verifier"] == 1.0, good.logs
    check_recorded(good.calls)
    assert {c.api for c in good.calls} == {ApiKind.CHAT} and {c.requested_model for c in good.calls} == {"policy"}
    agent = agent_calls(good.calls)
    assert len(agent) == 2, [c.index for c in good.calls]  # the wrong edit, then the right one
    assert "def greet(name)" in str(agent[0].request["messages"])  # the prompt names greet.py: aider added it
    failures = "AssertionError: 'Hello Ada' != 'Hello, Ada!'"
    assert failures in "".join(str(m["content"]) for m in agent[1].request["messages"])  # --auto-test's output
    side = [c for c in good.calls if c not in agent]
    assert len(side) == 2 and all("commit message" in str(c.request["messages"]) for c in side)  # one per edit
    assert [c.fidelity.value for c in agent if c.fidelity] == ["rerendered"] * 2  # it rebuilds its context
    assert {c.request["temperature"] for c in good.calls} == {0}  # aider's own, overridden by the pin:
    assert {c.sampling["temperature"] for c in good.calls} == {1.0}

    bad = stack.attempt("aider", script(WRONG), "aider-group", read_only=READ_ONLY)
    assert bad.rollout.exit_code == 0, bad.logs
    assert WRONG in (bad.workdir / "greet.py").read_text(), bad.logs
    assert bad.rewards["verifier"] == 0.0, bad.logs
    check_recorded(bad.calls)
    assert len(agent_calls(bad.calls)) == 2 and len(bad.calls) == 3, bad.logs  # one edit, one commit message

    metrics = train_one_step(stack.store, [good.rollout, bad.rollout], tmp_path)
    adv = metrics["advantages"]
    assert adv[good.rollout.id] > 0 > adv[bad.rollout.id], adv
    assert metrics["grad_norm"] > 0 and metrics["lora_b_max"] > 0, metrics


@pytest.mark.slow
def test_aider_asks_for_no_connection_but_the_gateway(default_stack: Stack,
                                                      proxy_log: tuple[str, list[str]]) -> None:  # noqa: F811
    """Through a gateway with no setting at all: served and recorded, as greedy calls (temperature 0)."""
    url, seen = proxy_log
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    a = default_stack.attempt("aider", script(RIGHT), "aider-offline", env=env, sandbox=False)
    assert a.rollout.exit_code == 0 and a.rewards["verifier"] == 1.0, a.logs
    assert seen == [], seen
    check_recorded(a.calls)
    assert len(a.calls) == 4 and {c.sampling["temperature"] for c in a.calls} == {0}
