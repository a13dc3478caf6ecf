"""What a LoRA policy costs the embedded engine: served beside each layer (peft) or merged, same run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/engine_lora.py [--rounds 3] [--requests 24] [--max-tokens 32]

A training run serves its policy as a LoRA adapter on the engine's base (the demo: r=16 on every projection
of SmolLM2-135M, 210 layers), so every decode step runs each adapted layer. Three engines per dtype, each
given the same ``--requests`` concurrent chat requests (the demo's 6 tasks x 4 attempts by default; one
shared system prompt, as an agent's) and ``--max-tokens`` greedy tokens each (EOS ignored): the base model
alone (no adapter: the floor), the adapter beside each layer (``[engine] lora_serving = "adapter"``: peft's
``lora.Linear.forward``), and the adapter merged into the engine's own copy of each adapted weight
(``"merged"``, float32 only; harnessrl/engines/embedded/lora_merge.py). Rounds are interleaved and medians
reported (the CPU may be shared); CPU-seconds are this process's (every thread). dtypes: float32 always (CPUs
without native bf16), and bfloat16 where the CPU multiplies it natively (what ``[engine] dtype = "auto"`` picks
there; merged is not offered for bf16 weights, which would round the update away). Also prints how many of
the merged engine's completions equal peft's token for token.

Measured 2026-12-05, 2-core Intel Xeon (bf16-native), alone: fp32 base 70.0 tokens/s, beside the layers 55.3
(+27%), merged 71.8 (0.77x the wall time of beside; 24 of 24 completions equal); bf16 base 87.1, beside 60.9
(+43%). Whole demo runs in fp32, 3 seeds each way: no shorter merged (docs/training.md, section 5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict  # noqa: E402

from harnessrl.bf16 import cpu_line, native_bf16  # noqa: E402
from harnessrl.engines.config import EngineConfig  # noqa: E402
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams  # noqa: E402
from harnessrl.models import load_model  # noqa: E402

SYSTEM = ("You answer questions about the atlas. Use the search tool to look a country up, then answer with the "
          "capital's name only, nothing else. ") * 4
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def adapter(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A trained-looking adapter (B non-zero) with the demo's settings, as the trainer publishes it."""
    model, _ = load_model("smollm2")
    policy = get_peft_model(model.to(dtype), LoraConfig(r=16, lora_alpha=32, target_modules=TARGETS))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.01)
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(policy).items()}


def engine(dtype: torch.dtype, kind: str, weights: dict[str, torch.Tensor]) -> EmbeddedEngine:
    model, tok = load_model("smollm2")
    serving = "merged" if kind == "merged" else "adapter"
    eng = EmbeddedEngine(model.to(dtype).eval(), tok, EngineConfig(model="smollm2", lora_serving=serving))
    if kind != "base":
        eng.update_weights(lora=weights, lora_config={"r": 16, "lora_alpha": 32, "target_modules": TARGETS})
    return eng


def run(eng: EmbeddedEngine, prompts: list[list[int]], max_tokens: int) -> tuple[float, float, list[list[int]]]:
    """Seconds, CPU-seconds and the completions of one batch of concurrent requests."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)
    t0, c0 = time.perf_counter(), time.process_time()
    handles = [eng.submit(p, params) for p in prompts]
    outs = [list(h.result().choices[0].token_ids) for h in handles]
    assert sum(map(len, outs)) == len(prompts) * max_tokens
    return time.perf_counter() - t0, time.process_time() - c0, outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    print(f"on {cpu_line()}; torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    _, tok = load_model("smollm2")
    prompts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM},
                                        {"role": "user", "content": f"What is the capital of country {i}?"}],
                                       add_generation_prompt=True, return_dict=True)["input_ids"]
               for i in range(args.requests)]
    print(f"{args.requests} concurrent requests, prompts of {len(prompts[0])} tokens, {args.max_tokens} new "
          f"tokens each; medians of {args.rounds} interleaved rounds", flush=True)
    dtypes = [torch.float32] + ([torch.bfloat16] if native_bf16(torch.device("cpu")) else [])
    for dtype in dtypes:
        kinds = ("base", "peft", "merged") if dtype == torch.float32 else ("base", "peft")
        weights = adapter(dtype)
        engines = {k: engine(dtype, k, weights) for k in kinds}
        try:
            for k in kinds:  # warm-up: kernels, prefix caches
                run(engines[k], prompts[:2], 4)
            wall: dict[str, list[float]] = {k: [] for k in kinds}
            cpu: dict[str, list[float]] = {k: [] for k in kinds}
            outs: dict[str, list[list[int]]] = {}
            for _ in range(args.rounds):
                for k in kinds:
                    w, c, outs[k] = run(engines[k], prompts, args.max_tokens)
                    wall[k].append(w)
                    cpu[k].append(c)
        finally:
            for e in engines.values():
                e.close()
        tokens = args.requests * args.max_tokens
        print(f"\n{str(dtype).removeprefix('torch.')}:")
        print(f"  {'':<22}{'tokens/s':>10}{'CPU ms/token':>14}{'wall s':>9}")
        labels = {"base": "base (no adapter)", "peft": "LoRA beside layers", "merged": "LoRA merged"}
        for k in kinds:
            w, c = statistics.median(wall[k]), statistics.median(cpu[k])
            print(f"  {labels[k]:<22}{tokens / w:>10.1f}{1000 * c / tokens:>14.2f}{w:>9.2f}")
        p, b = (statistics.median(wall[k]) for k in ("peft", "base"))
        line = f"  the adapter's cost over the base: beside the layers +{p / b - 1:.0%}"
        if "merged" in kinds:
            m = statistics.median(wall["merged"])
            same = sum(a == b_ for a, b_ in zip(outs["merged"], outs["peft"], strict=True))
            line += (f", merged {m / b - 1:+.0%} (merged / beside: {m / p:.2f}x wall); completions equal to "
                     f"peft's: {same} of {args.requests}")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
