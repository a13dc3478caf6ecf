"""The embedded engine's memory on the demo's rollouts, by glibc mmap threshold and trim setting: peak RSS
and wall time.

Each setting runs in its own process (glibc reads ``MALLOC_MMAP_THRESHOLD_`` at start), alternating
settings ``--rounds`` times so both see the same machine: ``--waves`` waves of 24 concurrent two-call
attempts of the demo agent's conversation (the gateway's chat template, its tools, the search result),
sampled at temperature 1.0 with the prefix cache on. Prints, per run, the peak RSS (VmHWM) and seconds.
``--trim-growth`` sets ``HARNESSRL_TRIM_GROWTH_MB`` (0: no ``malloc_trim`` while serving; harnessrl/memory.py).
``--dtypes`` loads the model in each dtype (``[engine] dtype``: bf16 weights and KV cache against fp32).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_memory.py --thresholds 32 4 1 --rounds 2
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_memory.py --thresholds 4 --trim-growth 0 128 --rounds 3
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_memory.py --thresholds 4 --dtypes float32 bfloat16 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo"


def worker(waves: int, dtype: str = "float32") -> None:
    """One measurement in this process: prints a JSON line {peak_gib, seconds}."""
    from harnessrl.memory import peak_rss_bytes, tune_allocator

    tune_allocator()
    from harnessrl.engines.config import EngineConfig
    from harnessrl.engines.embedded import EmbeddedEngine
    from harnessrl.engines.embedded.sampling import SamplingParams
    from harnessrl.gateway.render.renderer import TemplateRenderer
    from harnessrl.models import load_model

    spec = importlib.util.spec_from_file_location("demo_agent", DEMO / "agent.py")
    agent = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(agent)  # type: ignore[union-attr]
    model, tok = load_model("smollm2", dtype=dtype)
    render = TemplateRenderer(tok)
    engine = EmbeddedEngine(model, tok, EngineConfig(max_batch=32))
    tasks = [json.loads(line) for line in (DEMO / "train.jsonl").read_text().splitlines()]

    def attempt(i: int) -> None:
        q = tasks[i % len(tasks)]["input"]["question"]
        msgs = [{"role": "system", "content": "You answer questions about countries. Use the search tool to look up facts."},
                {"role": "user", "content": f"{q} Reply with only the name."}]
        first = engine.generate(render.render(f"a{i}", {"messages": msgs, "tools": agent.TOOLS}).prompt_token_ids,
                                SamplingParams(max_tokens=24, temperature=1.0, seed=i))
        text = tok.decode(first.choices[0].token_ids, skip_special_tokens=True)
        msgs += [{"role": "assistant", "content": text},
                 {"role": "user", "content": "Search results:\n" + agent.search(q) + "\nReply with only the name."}]
        engine.generate(render.render(f"b{i}", {"messages": msgs, "tools": agent.TOOLS}).prompt_token_ids,
                        SamplingParams(max_tokens=16, temperature=1.0, seed=i))

    t0 = time.perf_counter()
    for wave in range(waves):
        threads = [threading.Thread(target=attempt, args=(wave * 24 + k,)) for k in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    seconds = time.perf_counter() - t0
    peak = peak_rss_bytes() or 0
    engine.close()
    print(json.dumps({"peak_gib": peak / 2**30, "seconds": seconds}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--thresholds", type=int, nargs="+", default=[32, 4], help="MB")
    ap.add_argument("--trim-growth", type=int, nargs="+", default=[128], help="MB; 0 = off")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--waves", type=int, default=2)
    ap.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16"])
    ap.add_argument("--worker", nargs="?", const="float32", metavar="DTYPE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.waves, args.worker)
        return
    settings = [(mb, growth, dt) for mb in args.thresholds for growth in args.trim_growth for dt in args.dtypes]
    results: dict[tuple[int, int, str], list[dict]] = {s: [] for s in settings}
    for _ in range(args.rounds):
        for mb, growth, dt in settings:
            env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(mb * 1024 * 1024),
                   "HARNESSRL_TRIM_GROWTH_MB": str(growth)}
            out = subprocess.run([sys.executable, __file__, "--worker", dt, "--waves", str(args.waves)], env=env,
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            results[(mb, growth, dt)].append(r)
            print(f"threshold {mb:>3} MB, trim on {growth} MB growth, {dt}: peak {r['peak_gib']:.2f} GiB, "
                  f"{r['seconds']:.1f} s", flush=True)
    ref = statistics.median(r["seconds"] for r in results[settings[0]])
    for (mb, growth, dt), rs in results.items():
        peak = statistics.median(r["peak_gib"] for r in rs)
        secs = statistics.median(r["seconds"] for r in rs)
        print(f"{mb:>3} MB, trim on {growth} MB growth, {dt}: median peak {peak:.2f} GiB "
              f"({peak * 2**30 / 1e9:.2f} GB), median {secs:.1f} s ({secs / ref:.2f}x the first setting's time)")


if __name__ == "__main__":
    main()
