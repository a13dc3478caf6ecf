"""A store wrapper that records every call made on an event loop's thread (the rule it checks is in
docs/architecture.md, "The store and the event loop").

The store is synchronous: a call from a coroutine blocks every other coroutine on that loop (a gateway's
harness calls, a controller's other attempts) for as long as SQLite or PostgreSQL takes. Code on a loop
must hand each store operation to a worker thread (``asyncio.to_thread``); there no loop is running, so
the call is not recorded. Wraps a real store; only the call site is checked.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

#: Methods that promise not to wait, made to be called on a loop (``Store.record_calls_nowait``).
ON_LOOP_ALLOWED = frozenset({"record_calls_nowait"})


class LoopGuardStore:
    """Forwards to ``inner``; ``on_loop`` lists ``(method, caller)`` for calls made on a loop's thread."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.on_loop: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("__") or name in ON_LOOP_ALLOWED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass  # a worker thread (or plain sync code): fine
            else:
                frame = traceback.extract_stack(limit=2)[0]
                self.on_loop.append((name, f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno} {frame.name}"))
            return attr(*args, **kwargs)

        return call
