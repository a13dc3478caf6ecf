"""Sampling one decode step's rows: batched (the embedded engine's ``sample_rows``) vs one row at a time.

Until this change the engine drew each running sequence's next token on its own (a log-softmax over the
49k-token vocabulary and a ``torch.multinomial`` per row); a 24-row decode step of SmolLM2-135M spent about
a seventh of its time there. ``sample_rows`` does one log-softmax for the rows that share sampling settings
and draws every row by inverse CDF from its own generator. Both are exact samplers of the same
distribution (``tests/unit/engines/test_sampling.py``); this prints their time per decode step, side by side.

    .venv/bin/python benchmarks/engine_sampling.py --rows 24 --vocab 49152
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from harnessrl.engines.embedded.sampling import SamplingParams, processed_logprobs, sample_rows


def per_row(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]) -> list[int]:
    """The previous sampler: each row alone, ``torch.multinomial`` on its probabilities."""
    out = []
    for row, (p, g) in enumerate(zip(params, generators, strict=True)):
        logp = processed_logprobs(logits[row], p)
        token = int(torch.multinomial(logp.exp(), 1, generator=g))
        out.append(token)
        float(logp[token])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=24, help="sequences in the decode step (the demo runs 24)")
    ap.add_argument("--vocab", type=int, default=49152, help="vocabulary size (SmolLM2: 49152)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    logits = torch.randn(args.rows, args.vocab) * 3
    params = [SamplingParams(temperature=args.temperature) for _ in range(args.rows)]
    timings: dict[str, list[float]] = {"per row (multinomial)": [], "batched (sample_rows)": []}
    for r in range(args.rounds):  # interleaved, so both see the same machine load
        gens = [torch.Generator().manual_seed(r * args.rows + i) for i in range(args.rows)]
        t = time.perf_counter()
        per_row(logits, params, gens)
        timings["per row (multinomial)"].append(time.perf_counter() - t)
        gens = [torch.Generator().manual_seed(r * args.rows + i) for i in range(args.rows)]
        t = time.perf_counter()
        sample_rows(logits, params, gens)
        timings["batched (sample_rows)"].append(time.perf_counter() - t)
    print(f"{args.rows} rows x {args.vocab} vocabulary, temperature {args.temperature}, {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads")
    medians = {k: statistics.median(v) * 1000 for k, v in timings.items()}
    for name, ms in medians.items():
        print(f"  {name:<24} {ms:7.2f} ms per decode step (median)")
    base, new = medians.values()
    print(f"  batched / per row: {new / base:.2f}x")


if __name__ == "__main__":
    main()
