"""Pause/resume for weight updates, and the policy version stamped on every call.

While paused, new requests *wait* (bounded by a timeout) instead of failing: a harness has no reason to
survive a 429 it never sees from a real provider. In-flight requests finish; ``pause()`` returns once
they have drained, so the trainer can swap weights knowing no call straddles two versions.
"""

from __future__ import annotations

import asyncio

from harnessrl.gateway.errors import PauseTimeout


class PauseGate:
    def __init__(self, timeout_s: float, policy_version: int = 0) -> None:
        self._timeout = timeout_s
        self._open = asyncio.Event()
        self._open.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self.in_flight = 0
        self.waiting = 0
        self.policy_version = policy_version

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    async def enter(self) -> int:
        """Wait until not paused, count the request as in flight, return the policy version serving it."""
        if not self._open.is_set():
            self.waiting += 1
            try:
                await asyncio.wait_for(self._open.wait(), self._timeout)
            except TimeoutError:
                raise PauseTimeout(
                    f"the gateway has been paused (weight update) for more than {self._timeout:.0f}s; "
                    "retry later"
                ) from None
            finally:
                self.waiting -= 1
        self.in_flight += 1
        self._drained.clear()
        return self.policy_version

    def exit(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0:
            self.in_flight = 0
            self._drained.set()

    async def pause(self, timeout_s: float | None = None) -> bool:
        """Stop admitting requests and wait for in-flight ones; True when drained within the timeout."""
        self._open.clear()
        if self.in_flight == 0:
            return True
        try:
            await asyncio.wait_for(self._drained.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def resume(self) -> None:
        self._open.set()
