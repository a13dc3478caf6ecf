"""How likely is the demo's 1.0 answer, exactly? The probability of the bare correct name, by temperature.

Sampling counts (``demo_answer_mix.py``) need hundreds of attempts to see an answer that turns up once in
a few hundred. This reads a demo run's recorded final calls instead (the exact prompt tokens the engine
saw) and computes, for each, the probability that the policy answers with exactly the task's name
(``Name<|im_end|>`` or ``Name.<|im_end|>``, what the verifier scores 1.0) under the tempered distribution,
with the untrained model (or, with ``--checkpoint``, a trained adapter). The mean over attempts is the
chance that one attempt discovers the answer RL has to reinforce.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_bare_probability.py runs/demo/store.db --step 1 \\
        --temperatures 0.5 0.7 1.0 1.2 1.4
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import torch

from harnessrl.models import load_model
from harnessrl.store import open_store
from harnessrl.tasks import read_jsonl

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"


def answers() -> dict[str, str]:
    """Task id -> the name the verifier expects, for the demo's train and held-out tasks."""
    return {task["id"]: task["verifier_input"]["answer"]
            for split in ("train", "eval") for task in read_jsonl(DEMO / f"{split}.jsonl")}


def bare_probabilities(model, prompt: list[int], variants: list[list[int]],
                       temperatures: list[float]) -> dict[float, float]:
    """P(the completion is one of ``variants``) under softmax(logits / t), token by token, for each t."""
    totals = dict.fromkeys(temperatures, 0.0)
    for tokens in variants:
        ids = torch.tensor([prompt + tokens])
        with torch.inference_mode():
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float()  # one forward serves every t
        for t in temperatures:
            logp = torch.log_softmax(logits / t, -1).gather(1, torch.tensor(tokens)[:, None]).sum()
            totals[t] += math.exp(float(logp))
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", help="a demo run's store.db")
    ap.add_argument("--step", type=int, default=1, help="whose training attempts (1: the untrained policy's)")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.5, 0.7, 0.85, 1.0, 1.2, 1.4])
    ap.add_argument("--checkpoint", help="a checkpoint's adapter folder to score with instead of the base model")
    args = ap.parse_args()
    model, tokenizer = load_model("smollm2")
    if args.checkpoint:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.checkpoint)
    model.eval()
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    names = answers()
    store = open_store(f"sqlite:///{args.store}")
    rows: list[dict[float, float]] = []
    for rollout in store.list_rollouts(step=args.step, limit=10_000):
        calls = store.get_calls(rollout.id)
        if not calls or rollout.task_id not in names:
            continue
        final, name = calls[-1], names[rollout.task_id]
        variants = [tokenizer.encode(name) + [end], tokenizer.encode(name + ".") + [end]]
        rows.append(bare_probabilities(model, final.prompt_token_ids, variants, args.temperatures))
    if not rows:
        raise SystemExit(f"no recorded attempts of step {args.step} in {args.store}")
    print(f"{len(rows)} final calls of step {args.step}; P(bare correct name) per attempt:")
    print(f"{'temperature':>12} {'mean':>8} {'median':>8} {'max':>8}  expected attempts per discovery")
    for t in args.temperatures:
        ps = [r[t] for r in rows]
        mean = statistics.fmean(ps)
        print(f"{t:>12.2f} {mean:>8.4f} {statistics.median(ps):>8.4f} {max(ps):>8.4f}  "
              f"{(1 / mean if mean else float('inf')):.0f}")


if __name__ == "__main__":
    main()
