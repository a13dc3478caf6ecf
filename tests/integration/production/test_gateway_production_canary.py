"""A canary through the production routes: new sessions split between the stable version and a
candidate (served by its own engine model, recorded with its version); feedback decides; a rollback
moves even a live canary session back to the stable version on its next call."""

from __future__ import annotations

import time

import httpx
import openai

from harnessrl.production.config import CanaryConfig, FeedbackConfig, ProductionConfig


def test_a_worse_candidate_is_rolled_back_and_its_live_sessions_move(make_production, engine_server) -> None:  # noqa: ANN001
    # The windows (8 s) outlast the 14 sessions' serving even on a loaded machine: had the first ones closed
    # meanwhile, the canary could decide before the live session's last assertion below.
    production = make_production(ProductionConfig(
        feedback=FeedbackConfig(window_s=8.0, close_interval_s=0.2),
        canary=CanaryConfig(fraction=0.5, min_sessions=3, max_regression=0.1, evaluate_interval_s=0.2)))
    production.deployment("support")
    key = production.key("support")
    r = production.admin.post("/admin/deployments/support/canary", json={"candidate_version": 5,
                                                                        "engine_model": "candidate-5"})
    assert r.status_code == 201, r.text
    engine = engine_server.engine
    auth = {"Authorization": f"Bearer {key.key}"}

    def call(sid: str) -> tuple[str, int]:
        """One call of session ``sid``: the engine model that served it, the version recorded."""
        client = openai.OpenAI(base_url=f"{production.url}/p/support/s/{sid}/v1", api_key=key.key)
        client.chat.completions.create(model="policy", messages=[{"role": "user", "content": sid}], max_tokens=4)
        model = engine.requests[-1].get("model")
        (s,) = [s for s in production.sessions("support") if s["id"] == sid]
        return model, production.store.get_calls(s["rollout_id"])[-1].policy_version

    live = next(f"live{i}" for i in range(100) if call(f"live{i}")[0] == "candidate-5")  # a canary session
    arms: dict[str, str] = {}
    for i in range(14):
        assert call(live) == ("candidate-5", 5)  # kept talking (its window stays open)
        sid = f"s{i}"
        model, version = call(sid)
        arms[sid] = "canary" if model == "candidate-5" else "stable"
        assert (version == 5) == (arms[sid] == "canary")
        feedback = {"session_id": sid, "name": "thumbs", "value": 0 if arms[sid] == "canary" else 1}
        assert httpx.post(f"{production.url}/p/support/feedback", json=feedback, headers=auth).status_code == 201
    assert {s["id"]: s["arm"] for s in production.sessions("support") if s["id"] in arms} == arms  # as served
    assert 3 <= list(arms.values()).count("canary") <= 11
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = production.admin.get("/admin/deployments/support/canary").json()
        if not state["running"]:
            break
        call(live)  # keeps its window open while the others' close
        time.sleep(0.2)
    assert not state["running"] and state["decisions"][-1]["action"] == "rollback", state
    model, version = call(live)  # the live canary session's next call: the stable version serves it
    assert model != "candidate-5" and version != 5
    assert call("after")[0] != "candidate-5"  # and every new session
