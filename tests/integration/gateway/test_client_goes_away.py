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
