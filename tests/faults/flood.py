"""The runaway harness of ``test_fault_runaway.py``, as its own process (so that its CPU is not the
measuring client's): ``python flood.py SPEC_JSON`` prints the status counts of its calls as JSON.

SPEC: {"loop": {"base_url", "api_key"}, "calls": N, "concurrency": C, "big": {...}, "big_calls": M}
"""

from __future__ import annotations

import asyncio
import collections
import sys

import aiohttp
import orjson


async def main(spec: dict) -> dict:
    counts: dict[str, collections.Counter] = {"loop": collections.Counter(), "big": collections.Counter()}
    sem = asyncio.Semaphore(spec["concurrency"])

    async def call(http: aiohttp.ClientSession, r: dict, text: str, kind: str) -> None:
        body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
        async with http.post(f"{r['base_url']}/chat/completions", data=body,
                             headers={"Authorization": f"Bearer {r['api_key']}",
                                      "content-type": "application/json"}) as resp:
            await resp.read()
            counts[kind][resp.status] += 1

    async def loop_one(http: aiohttp.ClientSession, i: int) -> None:
        async with sem:
            await call(http, spec["loop"], f"loop {i}", "loop")

    async def big(http: aiohttp.ClientSession) -> None:
        for i in range(spec["big_calls"]):
            await call(http, spec["big"], f"{i} " + "z" * (1 << 20), "big")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        await asyncio.gather(*(loop_one(http, i) for i in range(spec["calls"])), big(http))
    return {k: {str(s): n for s, n in v.items()} for k, v in counts.items()}


if __name__ == "__main__":
    print(orjson.dumps(asyncio.run(main(orjson.loads(sys.argv[1])))).decode())
