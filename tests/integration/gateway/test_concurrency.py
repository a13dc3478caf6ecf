"""200 concurrent streaming calls across 50 rollouts: every call recorded once, in order, none lost."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson
from fakes.fake_engine import END

from harnessrl.types import CallStatus


def test_200_concurrent_streams_across_50_rollouts(make_gateway):
    gw = make_gateway()
    rollouts = [gw.rollout(task_id=f"t{i}", group_id=f"g{i % 5}") for i in range(50)]

    async def run() -> dict[tuple[str, str], str]:
        got: dict[tuple[str, str], str] = {}
        # A raw aiohttp SSE client: the openai client's per-chunk parsing would dominate the test's time
        # (the official client's streaming is covered in test_openai_client.py).
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

            async def one(r, marker: str, history: list[dict] | None = None) -> str:
                msgs = (history or []) + [{"role": "user", "content": marker}]
                body = {"model": "m", "messages": msgs, "stream": True}
                parts, done = [], False
                async with http.post(f"{r.base_url}/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {r.api_key}"}) as resp:
                    assert resp.status == 200
                    async for line in resp.content:
                        if line.startswith(b"data: [DONE]"):
                            done = True
                        elif line.startswith(b"data: "):
                            chunk = orjson.loads(line[6:])
                            assert "token_ids" not in chunk["choices"][0] if chunk["choices"] else True
                            parts.append(chunk["choices"][0]["delta"].get("content") or "")
                assert done
                got[(r.id, marker)] = text = "".join(parts)
                return text

            # 200 at once: 4 concurrent streams per rollout
            await asyncio.gather(*(one(r, f"{r.id} c{j}") for r in rollouts for j in range(4)))

            # then 3 dependent turns per rollout, all rollouts at once: order must be kept
            async def turns(r) -> None:
                history: list[dict] = []
                for k in range(3):
                    marker = f"{r.id} turn{k}"
                    text = await one(r, marker, history)
                    history += [{"role": "user", "content": marker}, {"role": "assistant", "content": text}]

            await asyncio.gather(*(turns(r) for r in rollouts))
        return got

    t0 = time.monotonic()
    got = asyncio.run(run())
    elapsed = time.monotonic() - t0
    assert len(got) == 50 * 7
    for r in rollouts:
        calls = gw.store.get_calls(r.id)
        assert [c.index for c in calls] == list(range(7))
        assert all(c.status == CallStatus.OK for c in calls)
        markers = [c.request["messages"][-1]["content"] for c in calls]
        assert sorted(markers[:4]) == sorted(f"{r.id} c{j}" for j in range(4))  # each once
        assert markers[4:] == [f"{r.id} turn{k}" for k in range(3)]  # dependent turns in order
        for c, m in zip(calls, markers, strict=True):
            assert c.completion_token_ids == [*got[(r.id, m)].encode(), END]  # what the client saw
        assert [c.created_at for c in calls] == sorted(c.created_at for c in calls)
    status = gw.admin.get("/admin/status").json()
    assert status["recorded"] == 350 and status["in_flight"] == 0
    assert status["commits"] < 350  # group commit batched concurrent calls
    print(f"350 streamed calls in {elapsed:.2f}s, {status['commits']} commits")
