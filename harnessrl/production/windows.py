"""Closing feedback windows: each due session gets its outcome, its reward row and its rollout closed.

A session's window closes ``[production.feedback] window_s`` after its last call. ``close_due_windows``
decides every due session (``combine.py``) in its own transaction (``Store.close_window``), so closing
never blocks the gateway's recording for long and a crash in the middle leaves only whole decisions.
It runs as a periodic task of the production gateway (``WindowCloser``) and is callable directly (tests,
``harnessrl`` commands). Counts per deployment say how windows ended: ``scored`` (feedback combined),
``defaulted`` (nobody rated it: ``missing`` = a number), ``dropped`` (``missing = "drop"``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from harnessrl.production.combine import decider
from harnessrl.production.config import FeedbackConfig
from harnessrl.store.base import Store

log = logging.getLogger(__name__)

#: ``busy(deployment, session_id)``: whether a call of that session is being served right now.
Busy = Callable[[str, str], bool]


def close_due_windows(store: Store, config: FeedbackConfig, *, now: float | None = None,
                      deployment: str | None = None, batch: int = 500,
                      busy: Busy | None = None) -> dict[str, Counter[str]]:
    """Close every window due by ``now``; returns ``{deployment: Counter(scored=, defaulted=, dropped=)}``.

    ``busy(deployment, session_id)``: the session has a call in flight, so it is not over (its window
    moves when that call is answered); it is left open for a later pass."""
    now = time.time() if now is None else now
    decide = decider(config)
    counts: dict[str, Counter[str]] = {}
    while True:
        due = store.due_windows(now, deployment=deployment, limit=batch)
        closed = 0
        for window in due:
            if busy is not None and busy(window.deployment, window.id):
                continue
            done = store.close_window(window.deployment, window.id, decide, now=now)
            if done is not None:  # None: a new call moved its window, or another closer was first
                counts.setdefault(done.deployment, Counter())[done.outcome_status] += 1
                closed += 1
        if len(due) < batch or closed == 0:
            break
    for name, c in counts.items():
        log.info("feedback windows closed for %s: %s", name, ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return counts


class WindowCloser:
    """The production gateway's periodic task: one ``close_due_windows`` pass per call, off the event
    loop; ``totals`` adds up every pass's counts per deployment (for metrics)."""

    def __init__(self, store: Store, config: FeedbackConfig, busy: Busy | None = None) -> None:
        self.store, self.config, self.busy = store, config, busy
        self.totals: dict[str, Counter[str]] = {}

    async def __call__(self) -> dict[str, Counter[str]]:
        counts = await asyncio.to_thread(close_due_windows, self.store, self.config, busy=self.busy)
        for name, c in counts.items():
            self.totals.setdefault(name, Counter()).update(c)
        return counts
