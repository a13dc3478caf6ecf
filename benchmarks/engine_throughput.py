"""Embedded engine vs plain transformers ``generate``: tokens/s at 1 and 8 concurrent requests, same run.

    .venv/bin/python benchmarks/engine_throughput.py [--model smollm2] [--max-tokens 32] [--repeats 3]

Every configuration generates exactly ``--max-tokens`` tokens per request (EOS ignored) from the same chat
prompts with greedy decoding, so all rows do the same work. Measurements are interleaved and the median of
``--repeats`` is reported, because the CPU may be shared. Targets: engine >= 1x generate at batch 1, and
engine with 8 concurrent requests >= 2x sequential (unbatched) generate of the same 8 requests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from harnessrl.engines.config import EngineConfig  # noqa: E402
from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams, start_server  # noqa: E402
from harnessrl.models import load_model  # noqa: E402

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain recursion to a child.",
    "List three fruits.",
    "How do planes fly?",
    "What is 17 times 3?",
    "Name a famous painter.",
    "Why is the sky blue?",
]


def hf_generate(model, prompts: list[list[int]], max_tokens: int) -> float:
    """Sequential, unbatched generate over ``prompts``; returns tokens/s."""
    t0 = time.perf_counter()
    for p in prompts:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([p]), max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False
            )
        assert out.shape[1] - len(p) == max_tokens
    return len(prompts) * max_tokens / (time.perf_counter() - t0)


def hf_generate_padded_batch(model, tokenizer, prompts: list[list[int]], max_tokens: int) -> float:
    """One left-padded static batch through generate (a reference point, not a target)."""
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    t0 = time.perf_counter()
    with torch.inference_mode():
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=pad,
        )
    return len(prompts) * max_tokens / (time.perf_counter() - t0)


def engine_concurrent(engine: EmbeddedEngine, prompts: list[list[int]], max_tokens: int) -> float:
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)
    t0 = time.perf_counter()
    handles = [engine.submit(p, params) for p in prompts]
    total = sum(len(h.result().choices[0].token_ids) for h in handles)
    assert total == len(prompts) * max_tokens
    return total / (time.perf_counter() - t0)


def http_concurrent(base_url: str, questions: list[str], max_tokens: int) -> float:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=600)
    counts: list[int] = []

    def one(q: str) -> None:
        r = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": q}],
            max_tokens=max_tokens,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
        counts.append(r.usage.completion_tokens)

    threads = [threading.Thread(target=one, args=(q,)) for q in questions]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == len(questions) * max_tokens
    return sum(counts) / (time.perf_counter() - t0)


def multi_turn(tokenizer, turns: int, max_tokens: int, step) -> tuple[float, int]:
    """An agent-like chat: every call resends the history plus a new message; returns (seconds, final length).

    ``step(prompt_ids) -> completion_ids`` runs one call; the engine's prefix cache can reuse the history.
    """
    history = tokenizer.apply_chat_template(
        [{"role": "system", "content": "You are a careful shell agent. " * 60}], tokenize=False
    )
    ids = tokenizer(history, add_special_tokens=False)["input_ids"]
    t0 = time.perf_counter()
    for turn in range(turns):
        user = tokenizer(
            f"<|im_start|>user\nObservation {turn}: " + "file.txt " * 40 + "<|im_end|>\n"
            "<|im_start|>assistant\n",
            add_special_tokens=False,
        )["input_ids"]
        ids = ids + user
        completion = step(ids)
        assert len(completion) == max_tokens
        ids = ids + completion
    return time.perf_counter() - t0, len(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-http", action="store_true", help="skip the rows measured through the HTTP server")
    args = ap.parse_args()

    model, tokenizer = load_model(args.model)
    engine = EmbeddedEngine(model, tokenizer, EngineConfig(model=args.model, max_batch=8))
    server = None if args.no_http else start_server(engine)
    prompts = [
        tokenizer(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False
            ),
            add_special_tokens=False,
        )["input_ids"]
        for q in QUESTIONS
    ]
    n = args.max_tokens
    hf_generate(model, prompts[:1], 4)  # warm-up: first calls pay one-time costs
    engine_concurrent(engine, prompts[:2], 4)

    rows: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        runs = {
            "generate, 1 request": lambda: hf_generate(model, prompts[:1], n),
            "engine, 1 request": lambda: engine_concurrent(engine, prompts[:1], n),
            "generate, 8 sequential": lambda: hf_generate(model, prompts, n),
            "engine, 8 concurrent": lambda: engine_concurrent(engine, prompts, n),
            "generate, 8 padded batch": lambda: hf_generate_padded_batch(model, tokenizer, prompts, n),
        }
        if server is not None:
            runs["engine HTTP, 1 request"] = lambda: http_concurrent(server.base_url, QUESTIONS[:1], n)
            runs["engine HTTP, 8 concurrent"] = lambda: http_concurrent(server.base_url, QUESTIONS, n)
        for name, fn in runs.items():
            rows.setdefault(name, []).append(fn())
    med = {k: statistics.median(v) for k, v in rows.items()}

    turns, turn_tokens = 4, 16

    def hf_step(ids: list[int]) -> list[int]:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([ids]), max_new_tokens=turn_tokens, min_new_tokens=turn_tokens, do_sample=False
            )
        return out[0, len(ids) :].tolist()

    def engine_step(ids: list[int]) -> list[int]:
        params = SamplingParams(max_tokens=turn_tokens, temperature=0, ignore_eos=True)
        return engine.generate(ids, params).choices[0].token_ids

    reused_before = engine.stats["reused_prefix_tokens"]
    hf_s, final_len = multi_turn(tokenizer, turns, turn_tokens, hf_step)
    agent = {"generate": hf_s, "engine": multi_turn(tokenizer, turns, turn_tokens, engine_step)[0]}
    reused = engine.stats["reused_prefix_tokens"] - reused_before

    print(
        f"model={args.model} max_tokens={n} repeats={args.repeats} threads={torch.get_num_threads()} "
        f"load={os.getloadavg()[0]:.1f}"
    )
    print(f"{'configuration':<28} {'tok/s (median)':>14}   runs")
    for k, v in med.items():
        print(f"{k:<28} {v:>14.2f}   {', '.join(f'{x:.2f}' for x in rows[k])}")
    best = {k: max(v) for k, v in rows.items()}
    r1 = med["engine, 1 request"] / med["generate, 1 request"]
    r8 = med["engine, 8 concurrent"] / med["generate, 8 sequential"]
    b1 = best["engine, 1 request"] / best["generate, 1 request"]
    b8 = best["engine, 8 concurrent"] / best["generate, 8 sequential"]
    for label, a, b, target in (
        ("1 request, engine / generate", r1, b1, 1.0),
        ("8 requests, engine concurrent / generate sequential", r8, b8, 2.0),
    ):
        verdict = "OK" if a >= target else "MISS"
        print(f"ratio {label}: median {a:.2f}x, best-of-runs {b:.2f}x (target >= {target:.1f}x) {verdict}")
    print(
        f"ratio engine 8 concurrent / generate 8 padded batch: "
        f"{med['engine, 8 concurrent'] / med['generate, 8 padded batch']:.2f}x  (reference)"
    )
    print(
        f"multi-turn agent ({turns} calls resending a history growing to {final_len} tokens, "
        f"{turn_tokens} new tokens each): generate {agent['generate']:.1f} s, engine {agent['engine']:.1f} s "
        f"-> {agent['generate'] / agent['engine']:.2f}x (prefix cache reused {reused} prompt tokens)"
    )
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS of this process (engine + generate baselines, one model copy): {rss_gb:.2f} GB")
    print(
        json.dumps(
            {
                "median_tok_s": med,
                "ratio_1": r1,
                "ratio_8": r8,
                "best_ratio_1": b1,
                "best_ratio_8": b8,
                "multi_turn_s": agent,
                "peak_rss_gb": rss_gb,
            }
        )
    )
    if server is not None:
        server.close()
    engine.close()


if __name__ == "__main__":
    main()
