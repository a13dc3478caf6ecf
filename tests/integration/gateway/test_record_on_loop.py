"""Where the gateway commits a call (``[gateway] record_inline``): on its event loop when the store can
without waiting (the default, "auto"), by the writer thread when it cannot -- and then the loop goes on
serving while the store is held, and the call is recorded once the store is free."""

from __future__ import annotations

import threading
import time

import httpx


def _chat(r, content: str) -> httpx.Response:  # noqa: ANN001 - the conftest's Rollout
    return httpx.post(f"{r.base_url}/chat/completions", headers={"Authorization": f"Bearer {r.api_key}"},
                      json={"model": "m", "messages": [{"role": "user", "content": content}]}, timeout=60)


def test_calls_one_at_a_time_are_committed_on_the_loop(make_gateway) -> None:  # noqa: ANN001
    gw = make_gateway()
    r = gw.rollout()
    for i in range(5):
        assert _chat(r, f"turn {i}").status_code == 200
    status = gw.admin.get("/admin/status").json()
    assert status["recorded"] == 5 and status["commits"] == 5
    assert status["commits_on_loop"] >= 4  # one batch in 64 goes to the thread (its commit checkpoints)
    assert [c.index for c in gw.store.get_calls(r.id)] == list(range(5))
    assert "harnessrl_store_commits_on_loop_total" in httpx.get(f"{gw.url}/metrics").text


def test_a_held_store_sends_the_call_to_the_thread_and_the_loop_keeps_serving(make_gateway) -> None:  # noqa: ANN001
    gw = make_gateway()
    r = gw.rollout()
    assert _chat(r, "warm").status_code == 200
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another writer in this process (the controller, the trainer) holds the store
        with gw.store._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    answer: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: answer.append(_chat(r, "while held")))
    try:
        caller.start()
        time.sleep(0.5)
        assert answer == []  # its commit waits for the store: its answer too
        t0 = time.monotonic()
        health = httpx.get(f"{gw.url}/healthz", timeout=10)
        assert health.status_code == 200 and time.monotonic() - t0 < 0.5  # the loop is not blocked
    finally:
        release.set()
        holder.join()
        caller.join(60)
    assert answer and answer[0].status_code == 200
    calls = gw.store.get_calls(r.id)
    assert [c.request["messages"][-1]["content"] for c in calls] == ["warm", "while held"]
    status = gw.admin.get("/admin/status").json()
    assert status["commits"] - status["commits_on_loop"] >= 1  # the held call went through the thread


def test_record_inline_false_keeps_every_commit_on_the_thread(make_gateway) -> None:  # noqa: ANN001
    gw = make_gateway(record_inline=False)
    r = gw.rollout()
    for i in range(3):
        assert _chat(r, f"turn {i}").status_code == 200
    status = gw.admin.get("/admin/status").json()
    assert status["recorded"] == 3 and status["commits_on_loop"] == 0
