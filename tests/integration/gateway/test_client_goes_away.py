"""A harness killed mid-call (its time limit): the call is recorded cancelled, and the gateway logs no error."""

from __future__ import annotations

import logging
import time

import httpx
import pytest


def test_a_harness_that_goes_away_mid_call_is_recorded_cancelled_without_an_asgi_error(gw, caplog):
    gw.engine.delay_s = 5.0  # the engine answers long after the harness has given up
    r = gw.rollout()
    caplog.set_level(logging.ERROR)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{r.base_url}/chat/completions", headers={"Authorization": f"Bearer {r.api_key}"},
                   json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=0.5)
    deadline = time.monotonic() + 60
    calls = []
    while time.monotonic() < deadline and not calls:
        calls = gw.store.get_calls(r.id)
        time.sleep(0.1)
    assert [c.status.value for c in calls] == ["cancelled"], calls
    assert "went away" in (calls[0].error or "")
    time.sleep(0.5)  # the serving task's end would be logged by now
    asgi = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR and "ASGI" in rec.getMessage()]
    assert not asgi, asgi  # was: "Exception in ASGI application" ... asyncio.CancelledError


def test_a_harness_that_leaves_before_the_watcher_starts_is_seen_when_it_starts(gw):
    """The watcher starts after ``WATCH_AFTER_S``; a harness gone by then is found gone at once, and the
    engine request is cancelled then, not when the engine would have answered (5 s)."""
    from harnessrl.gateway.call import WATCH_AFTER_S

    gw.engine.delay_s = 5.0
    r = gw.rollout()
    t0 = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{r.base_url}/chat/completions", headers={"Authorization": f"Bearer {r.api_key}"},
                   json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=WATCH_AFTER_S / 4)
    calls = []
    while time.monotonic() - t0 < 4.0 and not calls:
        calls = gw.store.get_calls(r.id)
        time.sleep(0.05)
    assert [c.status.value for c in calls] == ["cancelled"], calls
    assert time.monotonic() - t0 < 4.0  # well before the engine's answer
