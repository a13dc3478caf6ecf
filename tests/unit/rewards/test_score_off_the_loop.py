"""Scoring never calls the synchronous store on the event loop (the rule: docs/architecture.md, "The store
and the event loop"): every path of ``score_attempt`` with a store that records calls made on a loop."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.loop_guard_store import LoopGuardStore  # noqa: E402

from harnessrl.rewards import RewardConfig, score_attempt  # noqa: E402
from harnessrl.runners import TaskAssets  # noqa: E402
from harnessrl.store import Store, open_store  # noqa: E402
from harnessrl.types import FailureKind  # noqa: E402

from .test_score import (  # noqa: E402
    ANSWER_HARNESS,
    CHECKER,
    _remote_result,
    _remote_spec,
    attempt,
    script,
)


@pytest.fixture
def real_store() -> Iterator[Store]:
    s = open_store("sqlite:///:memory:")
    yield s
    s.close()


def _score(store: Store, spec, result, **cfg: object):  # noqa: ANN001, ANN202
    guard = LoopGuardStore(store)
    outcome = asyncio.run(score_attempt(spec, result, guard, RewardConfig(**cfg)))  # type: ignore[arg-type]
    assert guard.on_loop == [], f"store called on the event loop: {guard.on_loop}"
    return outcome


@pytest.mark.parametrize("case", ["posts and exit code", "verifier", "tampered", "verifier fails", "remote"])
def test_every_scoring_path_calls_the_store_from_a_worker_thread(tmp_path: Path, real_store: Store, case: str) -> None:
    store = real_store
    if case == "remote":
        spec = _remote_spec(store)
        store.add_reward(spec.rollout_id, 0.5, "answer")
        assert _score(store, spec, _remote_result(spec), exit_code_map={0: 1.0}, combine="sum").value == 1.5
        return
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "grader.py").write_text("print(0)\n")
    assets = TaskAssets(workspace=workspace, verifier_input={"answer": "42"})
    harness = ANSWER_HARNESS + ("\npathlib.Path('grader.py').write_text('print(1)')" if case == "tampered" else "")
    spec, result = attempt(tmp_path, store, harness, assets=assets, protected=("grader.py",),
                           posts=[("reward", 0.25)])
    if case == "posts and exit code":
        assert _score(store, spec, result, exit_code_map={0: 1.0}, combine="sum").value == 1.25
    elif case == "verifier":
        assert _score(store, spec, result, verifier=script(tmp_path, "check.py", CHECKER)).value == 1.0
    elif case == "tampered":
        outcome = _score(store, spec, result, verifier=script(tmp_path, "check.py", CHECKER))
        assert outcome.value == 0.0 and outcome.tampered
    else:
        outcome = _score(store, spec, result, verifier=script(tmp_path, "bad.py", "raise SystemExit(3)"))
        assert outcome.value is None and outcome.failure_kind is FailureKind.INFRA
