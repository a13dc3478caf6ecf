"""Two versions side by side in one real embedded engine (the tiny random model): the canary loads a
candidate as a named adapter from its folder, requests naming it are produced by its weights while the
stable model keeps serving unchanged, and a dropped candidate is refused afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_adapters import greedy, trained_adapter

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine
from harnessrl.engines.embedded.sampling import InvalidRequestError, SamplingParams
from harnessrl.models import tiny_model
from harnessrl.production.canary_weights import EmbeddedVersions, Weights

PROMPT = [5, 9, 14, 3, 22, 7]


@pytest.fixture
def engine():
    model, tokenizer = tiny_model()
    eng = EmbeddedEngine(model, tokenizer, EngineConfig(model="tiny", max_batch=4, context_window=256))
    yield eng
    eng.close()


def _served(engine: EmbeddedEngine, adapter: str | None) -> tuple[list[int], int]:
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    out = engine.submit(PROMPT, params, adapter=adapter).result(60)
    return out.choices[0].token_ids, out.policy_version


def test_candidate_served_beside_stable_by_its_own_weights(engine: EmbeddedEngine, tmp_path: Path) -> None:
    base = greedy(tiny_model()[0], PROMPT, 8)
    v1, v2 = trained_adapter(1), trained_adapter(2)
    v1.save_pretrained(tmp_path / "v1")
    expected_v1, expected_v2 = greedy(v1, PROMPT, 8), greedy(v2, PROMPT, 8)
    assert len({tuple(base), tuple(expected_v1), tuple(expected_v2)}) == 3  # the weights tell them apart

    versions = EmbeddedVersions(engine)
    versions.load("app-v1", 1, Weights(str(tmp_path / "v1")))  # from a checkpoint folder
    from harnessrl.weights.publish import trainable_update

    update = trainable_update(v2)
    versions.load("app-v2", 2, Weights(None, update["lora"], update["lora_config"]))  # from the trainer
    assert _served(engine, None) == (base, 0)  # the engine's own model (the stable arm) is untouched
    assert _served(engine, "app-v1") == (expected_v1, 1)
    assert _served(engine, "app-v2") == (expected_v2, 2)

    # in one batch: each row by its own adapter
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    handles = [engine.submit(PROMPT, params, adapter=a) for a in (None, "app-v1", "app-v2", None)]
    assert [h.result(60).choices[0].token_ids for h in handles] == [base, expected_v1, expected_v2, base]

    versions.drop("app-v1")  # another adapter remains: peft deletes it
    with pytest.raises(InvalidRequestError, match="no adapter 'app-v1'"):
        engine.submit(PROMPT, params, adapter="app-v1")
    assert "app-v1" not in engine.model.peft_config
    assert _served(engine, "app-v2") == (expected_v2, 2) and _served(engine, None) == (base, 0)
    versions.drop("app-v2")  # the last adapter: unnamed, kept loaded, never serves the stable arm
    assert _served(engine, None) == (base, 0)
    versions.load("app-v3", 3, Weights(str(tmp_path / "v1")))  # a new one lets peft delete the retired one
    assert list(engine.model.peft_config) == ["app-v3"] and _served(engine, "app-v3") == (expected_v1, 3)


def test_over_http_the_embedded_server_loads_and_unloads_like_vllm(engine: EmbeddedEngine, tmp_path: Path) -> None:
    """``LoraEngines`` (the canary's loader for engines at URLs) against the embedded engine's server."""
    import httpx

    from harnessrl.engines.embedded import start_server
    from harnessrl.production.canary_weights import LoraEngines

    v1 = trained_adapter(1)
    v1.save_pretrained(tmp_path / "v1")
    base, expected = greedy(tiny_model()[0], PROMPT, 8), greedy(v1, PROMPT, 8)
    server = start_server(engine, owns_engine=False)
    try:
        url = server.base_url
        loader = LoraEngines([url])
        loader.load("app-v1", 4, Weights(str(tmp_path / "v1")))

        def complete(model: str) -> tuple[list[int], int]:
            r = httpx.post(f"{url}/completions", json={"model": model, "prompt": PROMPT, "max_tokens": 8,
                                                       "temperature": 0, "ignore_eos": True,
                                                       "return_token_ids": True}, timeout=60)
            assert r.status_code == 200, r.text
            out = r.json()
            return out["choices"][0]["token_ids"], out["policy_version"]

        assert complete("app-v1") == (expected, 4)
        assert complete("tiny") == (base, 0)  # the engine's own model is not replaced
        loader.drop("app-v1")
        assert "app-v1" not in engine.adapters
        r = httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "app-v1"}, timeout=30)
        assert r.status_code == 404 and "cannot be found" in r.json()["error"]["message"]
    finally:
        server.close()
