"""Why a demo run learns or stalls, update by update: the chance of the 1.0 answer and its two parts.

The 1.0 answer is the name alone. For it, the policy has to start its final answer with the name, and then
stop. This reads a demo run's recorded final calls and its checkpoints, and for each policy version v (0:
the untrained model, v: the checkpoint after update v) scores the prompts that version actually answered
(step v + 1's training attempts) at temperature 1.0, the demo's training temperature:

- ``P(name first)``: the answer's first tokens are the task's name;
- ``P(stop | name)``: right after the name comes the end of the answer (``<|im_end|>``, or ``.`` and then
  it, both scored 1.0);
- ``P(bare)``: their product, the chance that one attempt samples the 1.0 answer, and ``expected``: that
  times the step's attempts, how many 1.0 answers the step should have sampled.

A run that stalls shows ``P(stop | name)`` falling to 0 while name-first sentences ("Mira is the capital
of ...", 0.25) are reinforced; one that learns found a bare name before that and ``P(stop | name)`` rises.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_answer_trace.py runs/demo
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_bare_probability import DEMO, answers  # noqa: E402

from harnessrl.config import load_config  # noqa: E402
from harnessrl.models import load_model  # noqa: E402
from harnessrl.store import open_store  # noqa: E402


def adapted(model, config_path: Path):
    """The model wrapped with the run's LoRA layout (the checkpoints hold only the adapter's tensors)."""
    from peft import LoraConfig, get_peft_model

    lora = load_config(config_path).training.lora
    if lora is None:
        raise SystemExit(f"{config_path} trains without LoRA; this script reads LoRA checkpoints")
    return get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=0.0,
                                            target_modules=lora.target_modules, task_type="CAUSAL_LM"))


def decompose(model, tokenizer, prompt: list[int], name: str) -> tuple[float, float]:
    """(P(the answer starts with ``name``), P(it stops right after the name | it started so)), one forward."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    (dot,) = tokenizer.encode(".")
    name_ids = tokenizer.encode(name)
    with torch.inference_mode():
        logp = torch.log_softmax(model(torch.tensor([prompt + name_ids + [dot]])).logits[0].float(), -1)
    at = len(prompt) - 1  # the logits at position i predict token i + 1
    first = math.exp(sum(float(logp[at + i, t]) for i, t in enumerate(name_ids)))
    after = at + len(name_ids)
    stop = math.exp(float(logp[after, end])) + math.exp(float(logp[after, dot]) + float(logp[after + 1, end]))
    return first, stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="a demo run's folder (store.db and checkpoints/)")
    ap.add_argument("--config", type=Path, default=DEMO / "config.toml", help="the run's config (its LoRA layout)")
    ap.add_argument("--versions", type=int, nargs="+", help="policy versions to score (default: all recorded)")
    args = ap.parse_args()
    from safetensors.torch import load_file

    base, tokenizer = load_model("smollm2")
    model = adapted(base, args.config).eval()
    names = answers()
    store = open_store(f"sqlite:///{args.run_dir / 'store.db'}")
    checkpoints = sorted((args.run_dir / "checkpoints").glob("step_*"))
    versions = args.versions if args.versions is not None else list(range(len(checkpoints)))
    print(f"{'version':>7} {'attempts':>8} {'P(name first)':>14} {'P(stop|name)':>13} {'P(bare)':>8} {'expected':>9}")
    for v in versions:
        if v > 0:
            missing = model.load_state_dict(load_file(str(args.run_dir / "checkpoints" / f"step_{v:06d}"
                                                           / "trainable.safetensors")), strict=False)
            if missing.unexpected_keys:
                raise SystemExit(f"checkpoint {v} does not fit {args.config}'s LoRA: {missing.unexpected_keys[:3]}")
        rows = []
        for rollout in store.list_rollouts(step=v + 1, limit=10_000):
            calls = store.get_calls(rollout.id)
            if calls and rollout.task_id in names and rollout.metadata.get("split") == "train":
                rows.append(decompose(model, tokenizer, calls[-1].prompt_token_ids, names[rollout.task_id]))
        if not rows:
            print(f"{v:>7} (no training attempts recorded at step {v + 1})")
            continue
        first = sum(f for f, _ in rows) / len(rows)
        stop = sum(s for _, s in rows) / len(rows)
        bare = sum(f * s for f, s in rows) / len(rows)
        print(f"{v:>7} {len(rows):>8} {first:>14.3f} {stop:>13.3f} {bare:>8.4f} {bare * len(rows):>9.2f}",
              flush=True)


if __name__ == "__main__":
    main()
