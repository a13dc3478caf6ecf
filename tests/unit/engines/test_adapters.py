"""Several LoRA adapters on one base (one per policy): requests naming different adapters share a batch,
and each is served exactly what its own adapter computes; versions move per adapter."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
from harnessrl.engines.embedded.engine import BASE
from harnessrl.engines.embedded.sampling import InvalidRequestError
from harnessrl.models import tiny_model

from .test_engine import forward_logprobs


def _policy(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model, _ = tiny_model()
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    return get_peft_model(model, config).eval()


def _close(ref: list[float], got: list[float]) -> bool:
    return max(abs(a - b) for a, b in zip(ref, got, strict=True)) < 1e-4


def test_two_adapters_batched_each_request_on_its_own() -> None:
    planner, solver = _policy(1), _policy(2)
    base, tokenizer = tiny_model()
    served, _ = tiny_model()
    engine = EmbeddedEngine(served, tokenizer, EngineConfig(model="tiny", max_batch=8, prefix_cache_tokens=0))
    try:
        engine.register_adapters(["planner", "solver"])
        prompt = tokenizer.encode("hello world")
        params = SamplingParams(max_tokens=8, seed=3, ignore_eos=True)
        unpublished = engine.generate(prompt, params)
        assert engine.update_weights(lora=get_peft_model_state_dict(planner),
                                     lora_config=planner.peft_config["default"], adapter="planner") == 1
        assert engine.update_weights(lora=get_peft_model_state_dict(solver),
                                     lora_config=solver.peft_config["default"], adapter="solver") == 1
        assert engine.update_weights(lora=get_peft_model_state_dict(solver),
                                     lora_config=solver.peft_config["default"], adapter="solver") == 2
        assert engine.version == 0 and engine.adapters == {"planner": 1, "solver": 2}

        stats_before = engine.stats["max_batch_seen"]
        handles = {name: engine.submit(prompt, params, adapter=name) for name in ("planner", "solver", BASE)}
        outs = {name: h.result(60) for name, h in handles.items()}
        assert engine.stats["max_batch_seen"] >= 3 > stats_before  # decoded together in one batch
        for name, model in (("planner", planner), ("solver", solver), (BASE, base)):
            ids = outs[name].choices[0].token_ids
            assert _close(forward_logprobs(model, prompt, ids), outs[name].choices[0].logprobs), name
        assert [outs[n].policy_version for n in ("planner", "solver")] == [1, 2]
        assert outs[BASE].choices[0].logprobs == pytest.approx(unpublished.choices[0].logprobs, abs=1e-4)
    finally:
        engine.close()


def test_unpublished_adapter_is_the_base_and_unknown_is_refused() -> None:
    base, tokenizer = tiny_model()
    engine = EmbeddedEngine(base, tokenizer, EngineConfig(model="tiny"))
    try:
        engine.register_adapters(["planner"])
        prompt = tokenizer.encode("hi")
        params = SamplingParams(max_tokens=4, seed=1, ignore_eos=True)
        a = engine.submit(prompt, params, adapter="planner").result(60)
        b = engine.generate(prompt, params)
        assert a.choices[0].token_ids == b.choices[0].token_ids and a.policy_version == 0
        with pytest.raises(InvalidRequestError, match="no adapter"):
            engine.submit(prompt, params, adapter="coder")
    finally:
        engine.close()
