"""The demo's training step under precision and recompute settings: seconds and peak memory, side by side.

Takes one recorded step of a demo run (its rollouts, rewards and sampled tokens, from the run's store),
builds the batch the run built, and times ``Trainer.step`` on it with the demo's training config and each
variant given, every variant in a fresh process (so each peak resident memory is its own), alternated over
``--rounds``. The step's matmuls run at about this CPU's fp32 peak already; what is left is precision
(bf16 autocast, on CPUs with native bf16) and the activation recompute that keeps the peak low.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_train_step.py runs/demo/store.db --step 2 \\
        --variants float32:1 bfloat16:1 bfloat16:0 --matmul
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_train_step.py runs/demo/store.db --step 2 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "demo" / "config.toml"


@contextlib.contextmanager
def demo_trainer(store_path: str, step: int, base: str = "float32",
                 **overrides: object) -> Iterator[tuple[Any, Callable[[], Any]]]:
    """The demo's trainer (its ``[training]`` config with ``overrides``) on a fresh SmolLM2 loaded in ``base``
    (a bf16 base is what the trainer shares with a bf16 engine), and a function that builds the batch the
    run built for ``step`` from its recorded rollouts."""
    from harnessrl.config import load_config
    from harnessrl.models import load_model
    from harnessrl.store import open_store
    from harnessrl.training.train_batch import batch_from_store
    from harnessrl.training.trainer import Trainer

    cfg = load_config(CONFIG).training.model_copy(update=overrides)
    store = open_store(f"sqlite:///{store_path}")
    rollouts = store.list_rollouts(step=step, limit=10_000)
    model, _ = load_model("smollm2", dtype=base)
    with tempfile.TemporaryDirectory() as run_dir:
        yield Trainer(model, cfg, run_dir=run_dir), lambda: batch_from_store(store, rollouts, cfg)


def worker(store_path: str, step: int, dtype: str, recompute: bool, repeats: int,
           base: str = "float32") -> dict[str, float]:
    seconds, metrics = [], {}
    with demo_trainer(store_path, step, base, dtype=dtype, gradient_checkpointing=recompute) as (trainer, batch):
        for _ in range(repeats):  # the same batch again: the LoRA weights move, the work does not
            b = batch()
            t0 = time.perf_counter()
            metrics = trainer.step(b)
            seconds.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(seconds), "tokens": metrics.get("tokens/computed", 0),
            "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def matmul_rates(threads: int) -> None:
    """fp32 against bf16 GFLOPS at the step's matmul shapes (1024-token micro-batches through SmolLM2's MLP)
    and the engine's (a decode step of 24 rows): what bf16 could buy on this CPU."""
    import torch

    torch.set_num_threads(threads)
    print(f"matmul GFLOPS, {threads} threads ({torch.backends.cpu.get_cpu_capability()}):")
    for m, k, n in [(1024, 576, 1536), (1024, 1536, 576), (24, 576, 1536), (24, 576, 576)]:
        rates = []
        for dtype in (torch.float32, torch.bfloat16):
            a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
            for _ in range(3):
                a @ b
            reps = max(5, int(2e10 / (2 * m * k * n)))
            t0 = time.perf_counter()
            for _ in range(reps):
                a @ b
            rates.append(2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9)
        print(f"  {m}x{k} @ {k}x{n}: float32 {rates[0]:.0f}, bfloat16 {rates[1]:.0f} ({rates[1] / rates[0]:.1f}x)")


def profile(store_path: str, step: int) -> None:
    """Where the step's time goes, by operator (the torch profiler over one step after a warm-up)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with demo_trainer(store_path, step) as (trainer, batch):
        trainer.step(batch())
        b = batch()
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.step(b)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", help="a demo run's store.db")
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=["float32:1", "bfloat16:1", "bfloat16:0"],
                    help="dtype:recompute[:base] ([training] dtype, gradient_checkpointing 1/0, and the dtype "
                    "the frozen base is loaded in: float32, or bfloat16 as shared with a bf16 engine)")
    ap.add_argument("--rounds", type=int, default=2, help="processes per variant, alternated")
    ap.add_argument("--repeats", type=int, default=2, help="timed steps per process (median)")
    ap.add_argument("--matmul", action="store_true", help="also print fp32 vs bf16 matmul rates here")
    ap.add_argument("--profile", action="store_true", help="only profile one step of the demo's config")
    ap.add_argument("--worker", nargs=4, metavar=("DTYPE", "RECOMPUTE", "REPEATS", "BASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        dtype, recompute, repeats, base = args.worker
        print(json.dumps(worker(args.store, args.step, dtype, recompute == "1", int(repeats), base)))
        return
    if args.profile:
        profile(args.store, args.step)
        return
    if args.matmul:
        matmul_rates(len(os.sched_getaffinity(0)))
    results: dict[str, list[dict[str, float]]] = {v: [] for v in args.variants}
    for _ in range(args.rounds):
        for variant in args.variants:
            dtype, recompute, base = (variant.split(":") + ["float32"])[:3]
            out = subprocess.run([sys.executable, __file__, args.store, "--step", str(args.step), "--worker",
                                  dtype, recompute, str(args.repeats), base], capture_output=True, text=True,
                                 check=True)
            results[variant].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = statistics.median(r["seconds"] for r in results[args.variants[0]])
    print(f"step {args.step} of {args.store}: {int(results[args.variants[0]][0]['tokens'])} computed tokens")
    print(f"{'dtype:recompute':>16} {'seconds (each round)':>24} {'median':>7} {'vs first':>8} {'peak GiB':>9}")
    for variant, rows in results.items():
        secs = [r["seconds"] for r in rows]
        med = statistics.median(secs)
        print(f"{variant:>16} {', '.join(f'{s:.1f}' for s in secs):>24} {med:>7.1f} {med / base:>7.2f}x "
              f"{max(r['peak_gib'] for r in rows):>9.2f}")


if __name__ == "__main__":
    main()
