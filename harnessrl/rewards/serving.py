"""Failures on the serving side (engine died, no engine, store down) make an attempt ``infra``, not ``agent``.

The gateway records such a call with its HTTP status first (``"502 ..."``, ``"503 no_engine_available:
..."``); a 4xx (a budget, a bad request) is the harness's own doing. An attempt whose harness stopped at
such a failure -- it exited non-zero or timed out, or no answered call followed the failure -- says nothing
about the policy: it must be re-run, never scored 0.
"""

from __future__ import annotations

from harnessrl.runners.spec import AttemptResult
from harnessrl.store.base import Store
from harnessrl.types import CallStatus


def serving_failure(store: Store, result: AttemptResult) -> str | None:
    """Why the attempt is infra because of a failed call on the serving side, or None."""
    last_failure = None
    answered_after = False
    for call in store.get_calls(result.rollout_id):
        if call.status == CallStatus.ERROR and (call.error or "")[:1] == "5":
            last_failure, answered_after = call, False
        elif call.status == CallStatus.OK and last_failure is not None:
            answered_after = True
    if last_failure is None:
        return None
    if answered_after and result.exit_code == 0 and not result.timed_out:
        return None  # the harness got past it and finished: its outcome is its own
    return f"call {last_failure.index} failed on the serving side: {last_failure.error}"
