"""Per-rollout pinned sampling: the controller pins e.g. greedy decoding for held-out evaluation."""

from __future__ import annotations

from openai import OpenAI


def test_rollout_pins_override_the_harness_sampling(gw) -> None:
    r = gw.rollout(metadata={"split": "eval", "sampling": {"temperature": 0.0, "seed": 7}})
    client = OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                   temperature=1.3, max_tokens=4)
    sent = gw.engine.requests[-1]
    assert sent["temperature"] == 0.0 and sent["seed"] == 7
    call = gw.store.get_calls(r.id)[0]
    assert call.sampling["temperature"] == 0.0  # what was really used is what is recorded


def test_unpinned_rollout_keeps_the_harness_sampling(gw) -> None:
    r = gw.rollout()
    client = OpenAI(base_url=r.base_url, api_key=r.api_key, max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                   temperature=1.3, max_tokens=4)
    assert gw.engine.requests[-1]["temperature"] == 1.3


def test_bad_pins_are_refused(gw) -> None:
    for metadata in ({"sampling": {"max_tokens": 9}}, {"sampling": "greedy"}, "not an object"):
        resp = gw.admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "metadata": metadata})
        assert resp.status_code == 400, resp.text
        assert "error" in resp.json()
