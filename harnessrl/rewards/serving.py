"""Failures on the serving side (engine died, no engine, store down) make an attempt ``infra``, not ``agent``.

The gateway records such a call with its HTTP status first (``"502 ..."``, ``"503 no_engine_available:
..."``); a 4xx (a budget, a bad request, a prompt too long, a request a live engine could not serve:
``gateway/engine_hop.py`` decides by cause) is the harness's own doing, and is scored as configured. An
attempt whose harness stopped at such a failure -- it exited non-zero or timed out, or no answered call
followed the failure -- says nothing about the policy: it must be re-run, never scored 0.

Timeouts likewise: an attempt killed at its time limit while a call of its own was still waiting on the
engine (the gateway records that call ``cancelled`` the moment the harness goes away) timed out because the
engine was behind -- infra; one killed while doing its own work (no call in flight) is the agent's.
"""

from __future__ import annotations

import time

from harnessrl.runners.spec import AttemptResult
from harnessrl.store.base import Store
from harnessrl.types import CallStatus

#: How long a timed-out attempt's scoring waits for the gateway to record the call cut off by the kill.
CUT_OFF_WAIT_S = 5.0  # the gateway records it at once; a machine at load 10 may take seconds


def serving_failure(store: Store, result: AttemptResult) -> str | None:
    """Why the attempt is infra because of a failed call on the serving side, or None."""
    calls = store.get_calls(result.rollout_id)
    if result.timed_out:
        deadline = time.monotonic() + CUT_OFF_WAIT_S
        while not (calls and calls[-1].status == CallStatus.CANCELLED) and time.monotonic() < deadline:
            time.sleep(0.1)  # the gateway records the cut-off call as soon as it sees the harness gone
            calls = store.get_calls(result.rollout_id)
        if calls and calls[-1].status == CallStatus.CANCELLED:
            cut = calls[-1]
            return (f"timed out waiting for the engine: call {cut.index} had waited {cut.latency_s or 0:.1f}s "
                    f"({len(cut.completion_token_ids)} tokens sampled) when the time limit stopped the harness")
    last_failure = None
    answered_after = False
    for call in calls:
        if call.status == CallStatus.ERROR and (call.error or "")[:1] == "5":
            last_failure, answered_after = call, False
        elif call.status == CallStatus.OK and last_failure is not None:
            answered_after = True
    if last_failure is None:
        return None
    if answered_after and result.exit_code == 0 and not result.timed_out:
        return None  # the harness got past it and finished: its outcome is its own
    return f"call {last_failure.index} failed on the serving side: {last_failure.error}"
