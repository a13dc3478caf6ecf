"""Fault 7: a retried harness records one rollout through two gateway processes sharing one PostgreSQL.

Calls must stay ordered and unduplicated (``tests/integration/postgres/test_two_gateways.py`` covers that
under load) and the per-rollout budgets must hold across both gateways: with a budget of N calls (or T
completion tokens) no more than N answered calls (T tokens) may be recorded, however the calls are spread.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from harnessrl.store import open_store
from harnessrl.types import CallStatus

pytestmark = pytest.mark.slow



async def spread(bases: list[str], key: str, n: int, stream_every: int = 2) -> list[int]:
    """``n`` calls of one rollout, alternating between the gateways, 4 at a time; their HTTP statuses
    (a stream refused in-band counts as 400)."""
    sem = asyncio.Semaphore(4)

    async def one(http: aiohttp.ClientSession, i: int) -> int:
        async with sem:
            stream = i % stream_every == 1
            body = {"model": "m", "messages": [{"role": "user", "content": f"call {i}"}], "stream": stream}
            async with http.post(f"{bases[i % len(bases)]}/chat/completions", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as resp:
                text = await resp.text()
                if resp.status == 200 and stream and ("data: [DONE]" not in text or '"error"' in text):
                    return 400
                return resp.status

    async with aiohttp.ClientSession() as http:
        return list(await asyncio.gather(*(one(http, i) for i in range(n))))


def answered(url: str, rollout_id: str) -> tuple[int, int]:
    store = open_store(url)
    try:
        calls = store.get_calls(rollout_id)
    finally:
        store.close()
    assert [c.index for c in calls] == list(range(len(calls)))
    ok = [c for c in calls if c.status == CallStatus.OK]
    return len(ok), sum(len(c.completion_token_ids) for c in ok)


@pytest.mark.parametrize("budget", ["calls", "tokens"])
def test_per_rollout_budgets_hold_across_two_gateways(pg_url, engine_procs, gateway_procs, budget):
    engine = engine_procs("--completion-len", "12")  # 13 tokens a call
    limits = {"max_calls_per_rollout": 10} if budget == "calls" else {"max_tokens_per_rollout": 100}
    config = {"gateway": {"limits": limits}}
    a = gateway_procs(pg_url, [engine.url], config)
    b = gateway_procs(pg_url, [engine.url], config)
    r = a.rollout()
    base_b = r["base_url"].replace(a.url, b.url)
    statuses = asyncio.run(spread([r["base_url"], base_b], r["api_key"], 30))
    n_ok, tokens = answered(pg_url, r["rollout_id"])
    assert statuses.count(200) == n_ok, (statuses, n_ok)
    assert set(statuses) <= {200, 400}, statuses
    if budget == "calls":
        assert n_ok == 10, f"{n_ok} answered calls with a budget of 10 across two gateways"
    else:
        assert tokens <= 100, f"{tokens} completion tokens recorded with a budget of 100 across two gateways"
        assert n_ok >= 100 // 13 - 1
