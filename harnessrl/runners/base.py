"""The runner interface: start an attempt of the unmodified harness, watch it, report what happened.

A runner never raises for anything the harness does (crash, hang, flood): it returns an
``AttemptResult`` whose status and failure kind follow the policy in ``harnessrl.runners.spec``.
Typical use by the controller::

    spec = make_attempt_spec(cfg, rollout_id=r.id, task_id=..., task_input=..., gateway_url=gw, api_key=key)
    result = await runner.run(spec, on_start=lambda handle: store.transition_rollout(
        r.id, RolloutStatus.RUNNING, runner_handle=handle))
    outcome = await score_attempt(spec, result, store, reward_config)  # rewards, while still running
    close_rollout(store, result, outcome)  # terminal status, failure kind, reason, exit code, logs
    await runner.release(result)
"""

from __future__ import annotations

import abc
from collections.abc import Callable

from harnessrl.runners.spec import AttemptResult, AttemptSpec

#: Called with the runner handle (e.g. ``"local:12345"``) once the harness process has started; runs
#: after any wait for a concurrency slot, so it is the moment to mark the rollout ``running``.
OnStart = Callable[[str], None]


class RunnerError(Exception):
    """Misuse of a runner (e.g. the same rollout id launched twice at once)."""


class Runner(abc.ABC):
    """Launches attempts; at most ``config.concurrency`` run at once, the rest wait their turn."""

    @abc.abstractmethod
    async def run(self, spec: AttemptSpec, on_start: OnStart | None = None) -> AttemptResult:
        """Run one attempt to its end (exit, timeout or cancel).

        Cancelling the awaiting task also kills the attempt (then ``CancelledError`` propagates);
        ``cancel(rollout_id)`` instead makes ``run`` return a ``cancelled`` result.
        """

    @abc.abstractmethod
    async def cancel(self, rollout_id: str) -> bool:
        """Stop an attempt that is queued or running; False if this runner has no such attempt."""

    @abc.abstractmethod
    def active(self) -> list[str]:
        """Rollout ids that are queued for a slot or running."""

    @abc.abstractmethod
    async def release(self, result: AttemptResult) -> None:
        """Delete the attempt's directory unless the config keeps it. Call after scoring."""

    async def aclose(self) -> None:
        """Cancel every active attempt."""
        for rollout_id in self.active():
            await self.cancel(rollout_id)
