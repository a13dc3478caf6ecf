"""Red team: a harness that provokes a failure of the serving side to escape its 0 is scored 0, not re-run.

A failure the request caused -- an over-long prompt the engine refuses in-band mid-stream (as vLLM does), a
logit_bias that makes a live engine answer 500 -- is the rollout's (a 4xx, recorded as such), so the attempt
is scored as configured. Only a failure of the serving side is ``infra`` and re-run. Real parts: the
controller, the local runner, the gateway, a fake engine process with vLLM's refusals, an openai-client
harness.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))  # faultkit, engine_proc

from faultkit import EngineProc, collect_one_step, free_port, write_fault_config  # noqa: E402

from harnessrl.store import open_store  # noqa: E402
from harnessrl.types import CallStatus, FailureKind  # noqa: E402

pytestmark = pytest.mark.slow
HARNESS = Path(__file__).with_name("dodge_harness.py")


@pytest.mark.parametrize(("mode", "status"), [("overlong", "400"), ("malformed", "422")])
def test_a_harness_that_provokes_a_serving_error_gets_its_zero_and_no_rerun(tmp_path, mode, status):
    engine = EngineProc(free_port(), ["--context-window", "2000", "--strict-logit-bias"]).start()
    try:
        cfg = write_fault_config(tmp_path, [engine.url], {"runner": {"command": [sys.executable, str(HARNESS)]}},
                                 max_retries=2, tasks=[{"id": "dodge", "input": {"question": "2+2?", "mode": mode}}])
        stats: dict = {}
        good, everything = asyncio.run(collect_one_step(cfg, stats=stats))
    finally:
        engine.kill()
    assert len(everything) == 1, [(r.failure_kind, r.error) for r in everything]  # not re-run
    (r,) = everything
    assert r.failure_kind == FailureKind.AGENT, r.error
    assert good == [r]
    assert stats.get("infra.reruns") == 0, stats
    store = open_store(f"sqlite:///{tmp_path / 'run' / 'store.db'}")
    try:
        rewards = {x.name: x.value for x in store.get_rewards(r.id)}
        calls = store.get_calls(r.id)
    finally:
        store.close()
    assert rewards["final"] == 0.0, rewards
    assert [c.status for c in calls] == [CallStatus.OK, CallStatus.ERROR]
    assert calls[1].error.startswith(status), calls[1].error
