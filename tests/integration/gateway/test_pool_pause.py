"""Weight-update pause/resume with version stamping, and failover across engines."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
from fakes.fake_engine import EngineServer, FakeEngine

from harnessrl.types import CallStatus

MSGS = [{"role": "user", "content": "hi"}]


def chat(r, **kw):
    c = openai.OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0, timeout=30)
    return c.chat.completions.create(model="m", messages=MSGS, max_tokens=8, **kw)


def wait_status(gw, key: str, value: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while gw.admin.get("/admin/status").json()[key] != value:
        assert time.monotonic() < deadline, f"gateway status {key} never became {value}"
        time.sleep(0.01)


def test_pause_holds_requests_drains_inflight_and_stamps_version(gw):
    r = gw.rollout()
    chat(r)
    gw.engine.delay_s = 1.0
    slow = threading.Thread(target=chat, args=(r,))
    slow.start()
    wait_status(gw, "in_flight", 1)  # the slow call is in flight
    resp = gw.admin.post("/admin/pause", json={"timeout_s": 10})
    assert resp.json() == {"paused": True, "drained": True, "in_flight": 0}
    assert len(gw.store.get_calls(r.id)) == 2  # pause returned only once the slow call was recorded
    slow.join()
    gw.engine.delay_s = 0.0
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (chat(r), done.set()))
    waiter.start()
    wait_status(gw, "waiting", 1)  # held, not refused
    time.sleep(0.2)
    assert not done.is_set()
    assert gw.admin.post("/admin/policy_version", json={"version": 1}).json() == {"policy_version": 1}
    gw.admin.post("/admin/resume")
    waiter.join(timeout=20)
    assert done.is_set()
    versions = [c.policy_version for c in gw.store.get_calls(r.id)]
    assert versions == [0, 0, 1]
    gw.engine.policy_version = 7  # an engine that reports its own version wins
    chat(r, stream=True).close()
    chat(r)
    assert [c.policy_version for c in gw.store.get_calls(r.id)][-1:] == [7]


def test_recording_a_version_through_the_admin_api_is_idempotent(make_gateway):
    """A trainer of one's own records its versions with ``record``; re-recording one (a resumed run) keeps
    the first row and still switches the gateway, through the same writer as harnessrl's own trainer."""
    gw = make_gateway()
    body = {"version": 3, "record": True, "checkpoint_path": "/ckpt/a", "metadata": {"step": 3}}
    assert gw.admin.post("/admin/policy_version", json=body).json() == {"policy_version": 3}
    again = gw.admin.post("/admin/policy_version", json=body | {"checkpoint_path": "/ckpt/b"})
    assert again.status_code == 200
    (row,) = gw.store.list_policy_versions()
    assert (row.version, row.checkpoint_path, row.metadata) == (3, "/ckpt/a", {"step": 3})
    bad = gw.admin.post("/admin/policy_version", json={"version": 4, "record": True, "metadata": [1]})
    assert bad.status_code == 400 and "metadata" in bad.json()["error"]["message"]
    assert gw.admin.get("/admin/status").json()["policy_version"] == 3  # refused before switching


def test_pause_timeout_is_503(make_gateway):
    from harnessrl.gateway import GatewayLimits

    gw = make_gateway(limits=GatewayLimits(pause_timeout_s=0.3))
    r = gw.rollout()
    gw.admin.post("/admin/pause")
    with pytest.raises(openai.InternalServerError, match="paused"):
        chat(r)
    gw.admin.post("/admin/resume")
    assert chat(r).choices[0].message.content


@pytest.fixture
def two_engines():
    servers = [EngineServer(FakeEngine(model="fake-model")).start() for _ in range(2)]
    yield servers
    for s in servers:
        s.stop()


def test_failover_and_none_available(make_gateway, two_engines):
    gw = make_gateway(engines=two_engines)
    rollouts = [gw.rollout() for _ in range(4)]
    for r in rollouts:
        chat(r)
    calls = [gw.store.get_calls(r.id)[0] for r in rollouts]
    assert {c.engine_id for c in calls} == {"engine-0", "engine-1"}  # least-outstanding spreads
    sticky = {r.id: c.engine_id for r, c in zip(rollouts, calls, strict=True)}
    for r in rollouts:
        chat(r)
        assert gw.store.get_calls(r.id)[-1].engine_id == sticky[r.id]  # affinity
    # an engine that answers 503 is failed over, streamed or not
    two_engines[0].engine.fail_next = [503]
    two_engines[1].engine.fail_next = []
    target = next(r for r in rollouts if sticky[r.id] == "engine-0")
    chat(target)
    assert "".join(ch.choices[0].delta.content or "" for ch in chat(target, stream=True) if ch.choices)
    assert [c.engine_id for c in gw.store.get_calls(target.id)[-2:]] == ["engine-1", "engine-1"]
    # a stream that breaks before anything reached the harness is retried elsewhere
    two_engines[1].engine.break_stream_after = 0
    assert "".join(ch.choices[0].delta.content or "" for ch in chat(target, stream=True) if ch.choices)
    assert gw.store.get_calls(target.id)[-1].status == CallStatus.OK
    time.sleep(0.6)  # the health check revives the engine marked down by the broken stream
    # one engine down: everything goes to the other
    two_engines[0].stop()
    for r in rollouts:
        chat(r)
        assert gw.store.get_calls(r.id)[-1].engine_id == "engine-1"
    two_engines[1].stop()
    with pytest.raises(openai.InternalServerError) as info:
        chat(rollouts[0])
    assert info.value.status_code == 503 and "no engine is available" in info.value.message
    health = httpx.get(f"{gw.url}/healthz")
    assert health.status_code == 503


def test_stream_broken_midway_is_recorded_as_error(gw):
    r = gw.rollout()
    gw.engine.break_stream_after = 5
    with pytest.raises(openai.APIError):
        for _ in chat(r, stream=True):
            pass
    (call,) = gw.store.get_calls(r.id)
    assert call.status == CallStatus.ERROR and "mid-stream" in call.error
    assert 0 < len(call.completion_token_ids) < 9  # the partial tokens are kept
    assert chat(r).choices[0].message.content  # the gateway keeps serving


def test_engine_4xx_passes_through_recorded(gw):
    r = gw.rollout()
    gw.engine.fail_next = [400]
    with pytest.raises(openai.BadRequestError, match="injected failure 400"):
        chat(r)
    (call,) = gw.store.get_calls(r.id)
    assert call.status == CallStatus.ERROR and call.engine_id is None


def test_engine_restart_on_same_port_reconnects(make_gateway):
    first = EngineServer(FakeEngine()).start()
    port = first.port
    gw = make_gateway(engines=[first])
    r = gw.rollout()
    chat(r)
    first.stop()
    second = EngineServer(FakeEngine(policy_version=3), port=port).start()
    try:
        deadline = time.monotonic() + 5
        while not gw.admin.get("/admin/status").json()["engines"][0]["healthy"]:
            assert time.monotonic() < deadline, "the health check did not revive the restarted engine"
            time.sleep(0.05)
        assert chat(r).choices[0].message.content  # a fresh connection, not the dead keep-alive one
        assert gw.store.get_calls(r.id)[-1].policy_version == 3
    finally:
        second.stop()


def test_pinned_sampling_overrides_and_is_recorded(make_gateway):
    gw = make_gateway(pinned_sampling={"temperature": 1.0, "top_p": 1.0})
    r = gw.rollout()
    chat(r, temperature=0.2, top_p=0.5, seed=7, stop=["\n"])
    sent = gw.engine.requests[-1]
    assert (sent["temperature"], sent["top_p"]) == (1.0, 1.0)
    sampling = gw.store.get_calls(r.id)[0].sampling
    assert sampling["temperature"] == 1.0 and sampling["top_p"] == 1.0
    assert sampling["seed"] == 7 and sampling["stop"] == ["\n"] and sampling["n"] == 1
