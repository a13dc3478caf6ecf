"""What the demo's untrained policy answers, by sampling temperature: how often each reward is sampled.

Replays the demo agent's two calls (``examples/demo/agent.py``: the question, then the search result and
"Reply with only the name.") with the gateway's own rendering of the conversation and tools, samples each
call with ``transformers.generate`` at every temperature asked, and scores the final answer with the
demo's verifier rule. A reward the policy never samples cannot be reinforced: this is the number that
decides whether a run can leave the 0.25 sentence (docs/training.md, "why a small model learns or stalls").

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_answer_mix.py --tasks 6 --n 8 --temperatures 0.7 1.0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import time
from pathlib import Path

import torch

from harnessrl.gateway.render.renderer import TemplateRenderer
from harnessrl.models import load_model

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"


def _agent():
    spec = importlib.util.spec_from_file_location("demo_agent", DEMO / "agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def score(answer: str, expected: str) -> float:
    """examples/demo/verify.py's rule, on a string."""
    words, expected = re.findall(r"[a-z]+", answer.lower()), expected.lower()
    if words == [expected]:
        return 1.0
    if expected in words and len(words) <= 12 and words.count(expected) == 1:
        return 0.25
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=6, help="first N training tasks")
    ap.add_argument("--n", type=int, default=8, help="attempts per task and temperature")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    agent = _agent()
    model, tok = load_model("smollm2")
    renderer = TemplateRenderer(tok)
    tasks = [json.loads(line) for line in (DEMO / "train.jsonl").read_text().splitlines()][: args.tasks]

    def sample(ids: list[int], n: int, temperature: float, max_new: int) -> list[str]:
        with torch.no_grad():
            out = model.generate(torch.tensor([ids] * n), do_sample=True, temperature=temperature, top_p=None,
                                 top_k=None, max_new_tokens=max_new, pad_token_id=tok.eos_token_id,
                                 eos_token_id=renderer.stop_token_ids, attention_mask=torch.ones(n, len(ids)))
        return [tok.decode(o[len(ids):], skip_special_tokens=True).strip() for o in out]

    t0 = time.perf_counter()
    print(f"{args.tasks} tasks x {args.n} attempts per temperature (SmolLM2-135M-Instruct, untrained)")
    print(f"{'temperature':>11}  {'1.0 (name)':>11}  {'0.25 (sentence)':>15}  {'0':>6}")
    for temperature in args.temperatures:
        rewards: list[float] = []
        for i, task in enumerate(tasks):
            question, expected = task["input"]["question"], task["verifier_input"]["answer"]
            messages = [{"role": "system", "content": "You answer questions about countries. Use the search tool "
                                                      "to look up facts."},
                        {"role": "user", "content": f"{question} Reply with only the name."}]
            first = renderer.render(f"a{i}", {"messages": messages, "tools": agent.TOOLS}).prompt_token_ids
            for j, reply in enumerate(sample(first, args.n, temperature, 24)):  # the agent's max_tokens
                turn = [*messages, {"role": "assistant", "content": reply},
                        {"role": "user", "content": "Search results:\n" + agent.search(question)
                         + "\nReply with only the name."}]
                ids = renderer.render(f"b{i}-{j}", {"messages": turn, "tools": agent.TOOLS}).prompt_token_ids
                rewards.append(score(sample(ids, 1, temperature, 16)[0], expected))
        n = len(rewards)
        counts = [sum(r == v for r in rewards) for v in (1.0, 0.25, 0.0)]
        print(f"{temperature:>11}  {counts[0]:>4} of {n:<4}  {counts[1]:>8} of {n:<4}  {counts[2]:>3} of {n}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
