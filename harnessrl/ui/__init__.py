"""The dashboard: runs, reward curves, rollouts, and each call's tokens coloured by loss mask and logprob.

``harnessrl ui --db URL`` serves it alone; ``mount_dashboard`` adds it to a gateway at ``/ui`` behind the
gateway's admin token (what ``harnessrl gateway`` and a run's stack do; the gateway itself knows no
dashboard). ``LazyDashboard``: the pages import the sample-building code, so they load on first visit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.store import Store

if TYPE_CHECKING:
    from harnessrl.gateway import Gateway

__all__ = ["LazyDashboard", "dashboard_app", "mount_dashboard"]


def dashboard_app(store: Store, *, token: str | None = None, viewer_token: str | None = None,
                  session_ttl_s: float | None = None, run_dirs: Sequence[Path] = (),
                  store_url: str | None = None, tokenizer: str | None = None) -> Any:
    """The dashboard as an ASGI app; with ``token`` (the operator's) every page needs it or
    ``viewer_token``, then an expiring session (see ``harnessrl.ui.auth``)."""
    from harnessrl.ui.app import Dashboard
    from harnessrl.ui.auth import SESSION_TTL_S, TokenGate

    app = Dashboard(store, run_dirs=run_dirs, store_url=store_url, tokenizer=tokenizer).app()
    if not token:
        if viewer_token:
            raise ValueError("a viewer token needs an operator token too")
        return app
    return TokenGate(app, token, viewer_token=viewer_token, session_ttl_s=session_ttl_s or SESSION_TTL_S)


class LazyDashboard:
    """An ASGI app that builds ``dashboard_app(**kwargs)`` on its first request (off the event loop)."""

    def __init__(self, store: Store, **kwargs: Any) -> None:
        self._store = store
        self._kwargs = kwargs
        self._app: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._app is None:
                self._app = dashboard_app(self._store, **self._kwargs)
            return self._app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self._app or await asyncio.to_thread(self._get)
        await app(scope, receive, send)


def mount_dashboard(gateway: Gateway) -> Gateway:
    """Serve the dashboard at the gateway's ``/ui``, read-only over its store, behind its admin token
    (a cookie after ``?token=``; the viewer token opens the pages only, never the admin API)."""
    gateway.mount("/ui", LazyDashboard(gateway.store, token=gateway.admin_token,
                                       viewer_token=gateway.viewer_token))
    return gateway
