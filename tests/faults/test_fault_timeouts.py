"""Fault 8: timeouts on an overloaded machine are classified by their cause.

An attempt that timed out while its call waited behind the engine (the engine holds every request far
longer than the attempt's time limit) says nothing about the policy: ``infra``, re-run. One that timed
out doing its own work (a fast answer, then the harness works past its limit) is ``agent``.
Real parts: the controller, the local runner, the gateway, fake engine processes, an openai-client harness.
"""

from __future__ import annotations

import asyncio

import pytest
from faultkit import collect_one_step, write_fault_config

from harnessrl.types import FailureKind, RolloutStatus

pytestmark = pytest.mark.slow


def test_a_timeout_while_queued_behind_the_engine_is_infra_and_rerun(tmp_path, engine_procs):
    engine = engine_procs("--delay", "30")  # every request waits 30 s: an engine far behind its queue
    # 10 s: the harness (a Python process importing openai) must reach its call before the limit even on a
    # loaded machine; at 3 s and load 8 it was still starting when killed, a timeout of its own (agent).
    cfg = write_fault_config(tmp_path, [engine.url], timeout_s=10, max_retries=1)
    good, everything = asyncio.run(collect_one_step(cfg))
    assert not good, [(r.status, r.failure_kind, r.error) for r in good]
    assert len(everything) == 2, "the infra timeout was not re-run (once: max_retries = 1)"
    for r in everything:
        assert r.status == RolloutStatus.TIMED_OUT and r.failure_kind == FailureKind.INFRA, (r.status, r.error)
        assert "waiting for the engine" in r.error, r.error


def test_a_timeout_doing_its_own_work_is_agent(tmp_path, engine_procs):
    engine = engine_procs()
    cfg = write_fault_config(tmp_path, [engine.url], timeout_s=3, max_retries=1,
                             tasks=[{"id": "busy", "input": {"question": "hi", "mode": "work", "work_s": 30}}])
    good, everything = asyncio.run(collect_one_step(cfg))
    assert len(everything) == 1, "an agent timeout was re-run"
    (r,) = everything
    assert r.status == RolloutStatus.TIMED_OUT and r.failure_kind == FailureKind.AGENT, (r.status, r.error)
    assert good == [r]
