"""Two gateway processes share one PostgreSQL store and serve the SAME rollouts concurrently.

Each rollout gets several multi-turn conversations whose turns alternate between the two gateways, so
every process keeps finding calls in the store that the other one wrote: call indices must stay dense
and unique, no answered call may be lost or recorded twice, and prefix compression must still point each
turn at its own previous turn (the per-process token cache has to notice the other writer).
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass

import aiohttp
import httpx
import orjson
import pytest
from fakes.fake_engine import END, render_chat

from harnessrl.store import open_store
from harnessrl.types import CallStatus

ROLLOUTS, WORKERS, TURNS = 6, 4, 6


@dataclass
class Answer:
    rollout_id: str
    worker: int
    turn: int
    marker: str
    content: str
    index: int | None  # the x-harnessrl-call-index header (non-streaming responses only)
    prompt_len: int  # of this turn's request, as the fake engine's template renders it


async def _conversation(http: aiohttp.ClientSession, gateways: list, r: dict, worker: int,
                        answers: list[Answer]) -> None:
    rid, headers = r["rollout_id"], {"Authorization": f"Bearer {r['api_key']}"}
    messages: list[dict] = []
    for turn in range(TURNS):
        gw = gateways[(worker + turn) % 2]
        marker = f"{rid} w{worker} t{turn}"
        messages.append({"role": "user", "content": marker})
        stream = (worker + turn) % 3 == 0
        body = {"model": "m", "messages": messages, "stream": stream}
        async with http.post(f"{gw.url}/r/{rid}/v1/chat/completions", json=body, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            if stream:
                parts, index = [], None
                async for line in resp.content:
                    if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                        parts.append(orjson.loads(line[6:])["choices"][0]["delta"].get("content") or "")
                content = "".join(parts)
            else:
                data = orjson.loads(await resp.read())
                content, index = data["choices"][0]["message"]["content"], int(resp.headers["x-harnessrl-call-index"])
        answers.append(Answer(rid, worker, turn, marker, content, index, len(render_chat(messages))))
        messages = [*messages, {"role": "assistant", "content": content}]
    reward = {"value": float(worker), "name": f"w{worker}"}
    async with http.post(f"{gateways[worker % 2].url}/r/{rid}/reward", json=reward, headers=headers) as resp:
        assert resp.status == 201, await resp.text()


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.timeout(240)
def test_two_gateways_share_rollouts_without_losing_or_duplicating_calls(pg_url, engine_server, start_gateway):
    gateways = [start_gateway(pg_url, engine_server.url), start_gateway(pg_url, engine_server.url)]
    rollouts = [
        httpx.post(f"{gateways[i % 2].url}/admin/rollouts", headers=gateways[0].admin,
                   json={"task_id": f"t{i}", "group_id": "g"}).json()
        for i in range(ROLLOUTS)
    ]  # fmt: skip
    answers: list[Answer] = []

    async def run() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            await asyncio.gather(*(_conversation(http, gateways, r, w, answers)
                                   for r in rollouts for w in range(WORKERS)))

    asyncio.run(run())
    assert len(answers) == ROLLOUTS * WORKERS * TURNS

    store = open_store(pg_url)
    try:
        by_marker = {a.marker: a for a in answers}
        for r in rollouts:
            rid = r["rollout_id"]
            calls = store.get_calls(rid)
            assert [c.index for c in calls] == list(range(WORKERS * TURNS))  # dense, unique, none lost
            markers = collections.Counter(c.request["messages"][-1]["content"] for c in calls)
            assert set(markers) == {a.marker for a in answers if a.rollout_id == rid}
            assert max(markers.values()) == 1  # none recorded twice
            expected_bytes = 0
            for call in calls:
                a = by_marker[call.request["messages"][-1]["content"]]
                assert call.status is CallStatus.OK
                assert call.prompt_token_ids == render_chat(call.request["messages"])
                assert call.completion_token_ids == [*a.content.encode(), END]
                if a.index is not None:
                    assert call.index == a.index  # the index the gateway answered with is the stored one
                # Only the suffix beyond the longest prefix shared with ANY earlier call is stored, even when
                # those calls came through the other process; for a later turn that is its own previous turn.
                shared = max((_shared(call.prompt_token_ids, c.prompt_token_ids + c.completion_token_ids)
                              for c in calls[: call.index]), default=0)
                prev = by_marker.get(f"{rid} w{a.worker} t{a.turn - 1}")
                if prev is not None:
                    assert shared == prev.prompt_len + len(prev.content.encode()) + 1
                expected_bytes += 4 * (len(call.prompt_token_ids) - shared + 2 * len(call.completion_token_ids))
            assert store.storage_bytes(rid) == expected_bytes
            assert sorted(rw.name for rw in store.get_rewards(rid)) == [f"w{w}" for w in range(WORKERS)]
    finally:
        store.close()


def test_a_rollout_closed_through_one_gateway_is_closed_for_the_other(pg_url, engine_server, start_gateway):
    a, b = start_gateway(pg_url, engine_server.url), start_gateway(pg_url, engine_server.url)
    r = httpx.post(f"{a.url}/admin/rollouts", headers=a.admin, json={"task_id": "t", "group_id": "g"}).json()
    headers = {"Authorization": f"Bearer {r['api_key']}"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    chat = f"/r/{r['rollout_id']}/v1/chat/completions"
    assert httpx.post(b.url + chat, json=body, headers=headers).headers["x-harnessrl-call-index"] == "0"
    assert httpx.post(a.url + chat, json=body, headers=headers).headers["x-harnessrl-call-index"] == "1"
    for status in ("running", "succeeded"):
        resp = httpx.post(f"{a.url}/admin/rollouts/{r['rollout_id']}/status", headers=a.admin,
                          json={"status": status})
        assert resp.status_code == 200, resp.text
    # b still holds the rollout as open in memory; the store's row lock and status check refuse the call
    resp = httpx.post(b.url + chat, json=body, headers=headers)
    assert resp.status_code == 410, resp.text
    assert resp.json()["error"]["code"] == "rollout_closed"
    store = open_store(pg_url)
    try:
        assert [c.index for c in store.get_calls(r["rollout_id"])] == [0, 1]
    finally:
        store.close()


@pytest.mark.timeout(240)
def test_sigkill_one_gateway_the_other_carries_on(pg_url, engine_server, start_gateway):
    """Behind one address, losing a gateway loses no answered call, and the survivor numbers on densely."""
    gateways = [start_gateway(pg_url, engine_server.url), start_gateway(pg_url, engine_server.url)]
    victim, survivor = gateways
    rollouts = [
        httpx.post(f"{victim.url}/admin/rollouts", headers=victim.admin, json={"task_id": f"t{i}", "group_id": "g"}).json()
        for i in range(4)
    ]  # fmt: skip
    answered: list[tuple[str, str, str, int | None]] = []  # (rollout, marker, content, index)
    killed = asyncio.Event()

    async def worker(http: aiohttp.ClientSession, r: dict, k: int) -> None:
        headers = {"Authorization": f"Bearer {r['api_key']}"}
        for i in range(40):
            gw = survivor if killed.is_set() or (i + k) % 2 else victim
            marker = f"{r['rollout_id']} w{k} #{i}"
            stream = i % 3 == 0
            body = {"model": "m", "messages": [{"role": "user", "content": marker}], "stream": stream}
            try:
                async with http.post(f"{gw.url}/r/{r['rollout_id']}/v1/chat/completions", json=body,
                                     headers=headers) as resp:  # fmt: skip
                    assert resp.status == 200, await resp.text()
                    if stream:
                        parts, done = [], False
                        async for line in resp.content:
                            if line.startswith(b"data: [DONE]"):
                                done = True
                            elif line.startswith(b"data: "):
                                parts.append(orjson.loads(line[6:])["choices"][0]["delta"].get("content") or "")
                        if done:
                            answered.append((r["rollout_id"], marker, "".join(parts), None))
                    else:
                        data = orjson.loads(await resp.read())
                        answered.append((r["rollout_id"], marker, data["choices"][0]["message"]["content"],
                                         int(resp.headers["x-harnessrl-call-index"])))  # fmt: skip
            except (aiohttp.ClientError, OSError, ValueError):
                assert gw is victim, "the surviving gateway failed a request"

    async def killer() -> None:
        while len(answered) < 60:
            await asyncio.sleep(0.002)
        victim.proc.kill()
        killed.set()

    async def run() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            await asyncio.gather(killer(), *(worker(http, r, k) for r in rollouts for k in range(3)))

    asyncio.run(run())
    assert victim.proc.wait(timeout=10) == -9
    assert len(answered) >= 4 * 3 * 40 - 12  # at most the requests in flight at the kill went unanswered

    store = open_store(pg_url)
    try:
        stored = {}
        for r in rollouts:
            calls = store.get_calls(r["rollout_id"])
            assert [c.index for c in calls] == list(range(len(calls)))
            for c in calls:
                marker = c.request["messages"][-1]["content"]
                assert marker not in stored, f"{marker!r} recorded twice"
                stored[marker] = c
        for _, marker, content, index in answered:
            call = stored[marker]  # every answered call survived the crash
            assert call.completion_token_ids == [*content.encode(), END]
            assert index is None or call.index == index
    finally:
        store.close()
