"""A 30-turn rollout recorded through the gateway stores linearly many bytes, not quadratically."""

from __future__ import annotations

import httpx

from harnessrl.types import Fidelity


def test_30_turn_rollout_storage_is_linear(gw):
    r = gw.rollout()
    messages = [{"role": "system", "content": "You are a shell agent. " * 20}]
    sizes = []
    with httpx.Client(headers={"Authorization": f"Bearer {r.api_key}"}, timeout=30) as http:
        for turn in range(30):
            messages.append({"role": "user", "content": f"observation {turn}: " + "ls -la output " * 10})
            resp = http.post(f"{r.base_url}/chat/completions", json={"model": "m", "messages": messages})
            assert resp.status_code == 200
            messages.append(resp.json()["choices"][0]["message"])
            sizes.append(gw.store.storage_bytes(r.id))
    calls = gw.store.get_calls(r.id)
    assert [c.fidelity for c in calls[1:]] == [Fidelity.EXTENDED] * 29
    total_prompt_tokens = sum(len(c.prompt_token_ids) for c in calls)
    last_prompt = len(calls[-1].prompt_token_ids)
    # Quadratic storage would hold every prompt in full (~15x the last prompt here); linear holds each
    # token about once. Per-turn growth stays flat: the last 10 turns cost about what the middle 10 did.
    assert total_prompt_tokens > 12 * last_prompt
    assert sizes[-1] < 3 * 4 * last_prompt
    late, middle = sizes[29] - sizes[19], sizes[19] - sizes[9]
    assert late < 1.3 * middle
