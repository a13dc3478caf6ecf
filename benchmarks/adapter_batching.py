"""Several LoRA adapters in one embedded engine: requests of two adapters decoded in one mixed batch
(peft ``adapter_names``) vs the same requests served one adapter at a time, in one run.

The alternative is what an engine without mixed batches does: finish one adapter's requests, then the
other's. Both sides run the same requests (same prompts, lengths and seeds) on the same engine; a third
row is the same count on one adapter alone, the cost mixing would ideally match.

    .venv/bin/python benchmarks/adapter_batching.py [--model tiny|smollm2] [--requests 8] [--tokens 32]
"""

from __future__ import annotations

import argparse
import time

import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
from harnessrl.models import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--requests", type=int, default=8, help="requests per adapter")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    base, tokenizer = load_model(args.model, dtype="float32")
    engine = EmbeddedEngine(base, tokenizer, EngineConfig(model=args.model, max_batch=2 * args.requests,
                                                          prefix_cache_tokens=0))
    engine.register_adapters(["a", "b"])
    for seed, name in ((1, "a"), (2, "b")):
        torch.manual_seed(seed)
        policy = get_peft_model(load_model(args.model, dtype="float32")[0], LoraConfig(
            r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], init_lora_weights=False))
        engine.update_weights(lora=get_peft_model_state_dict(policy), lora_config=policy.peft_config["default"],
                              adapter=name)
    prompt = tokenizer.encode("Plan a search in the atlas for the capital of Quivenzan.")

    def run(names: list[str]) -> float:
        t = time.perf_counter()
        handles = [engine.submit(prompt, SamplingParams(max_tokens=args.tokens, seed=i, ignore_eos=True),
                                 adapter=n) for i, n in enumerate(names)]
        for h in handles:
            h.result(600)
        return time.perf_counter() - t

    n = args.requests
    rows: dict[str, list[float]] = {"mixed (a and b in one batch)": [], "one adapter at a time": [],
                                    "one adapter only (same count)": []}
    try:
        run(["a", "b"])  # warm-up
        for _ in range(args.repeats):
            rows["mixed (a and b in one batch)"].append(run(["a", "b"] * n))
            rows["one adapter at a time"].append(run(["a"] * n) + run(["b"] * n))
            rows["one adapter only (same count)"].append(run(["a"] * (2 * n)))
    finally:
        engine.close()
    best = {k: min(v) for k, v in rows.items()}
    ref = best["mixed (a and b in one batch)"]
    print(f"model {args.model}, {2 * n} requests x {args.tokens} tokens, best of {args.repeats}, "
          f"{torch.get_num_threads()} threads")
    for k, v in best.items():
        print(f"  {k:32s} {v:7.2f} s   {v / ref:5.2f}x the mixed batch's time")


if __name__ == "__main__":
    main()
