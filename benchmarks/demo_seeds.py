"""The README's demo, N times with different seeds: does it learn every time, how long, in how much memory?

Runs ``harnessrl train <config> --seed S --run-dir <out>/seed_S`` once per seed, one after another (each
run uses every core), and prints per seed the held-out reward before -> after, the gain, the wall time, the
peak resident memory of the ``harnessrl train`` process (VmHWM) and, separately, the peak of its whole
process tree (the agents and verifiers it launches included), then min / median / max of each column.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_seeds.py --seeds 0 1 2
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/demo_seeds.py --n 10 --config examples/tools/config.toml

A run "learns" when the held-out reward rises by at least --gain (0.3, the issue's bar).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil

from harnessrl.bf16 import cpu_line

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = re.compile(r"held-out reward: ([0-9.]+|n/a) -> ([0-9.]+|n/a)")


@dataclass
class SeedRun:
    seed: int
    before: float
    after: float
    wall_s: float
    peak_gb: float  # the harnessrl train process
    tree_peak_gb: float  # that process and every descendant, summed at the same instant
    exit_code: int

    @property
    def gain(self) -> float:
        return self.after - self.before


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _peak_hwm(proc: psutil.Process) -> int:
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def run_seed(config: Path, seed: int, out: Path, log: Path) -> SeedRun:
    cmd = [sys.executable, "-m", "harnessrl.cli", "train", str(config), "--seed", str(seed),
           "--run-dir", str(out / f"seed_{seed}")]
    t0 = time.perf_counter()
    peak = tree = 0
    with log.open("w") as f:
        child = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        proc = psutil.Process(child.pid)
        while child.poll() is None:
            peak = max(peak, _peak_hwm(proc))  # VmHWM only grows: the last reading is the peak
            tree = max(tree, _tree_rss(proc))
            time.sleep(0.5)
    wall = time.perf_counter() - t0
    text = log.read_text()
    m = HELD_OUT.findall(text)
    before, after = (float("nan"), float("nan")) if not m or "n/a" in m[-1] else map(float, m[-1])
    return SeedRun(seed, before, after, wall, peak / 2**30, tree / 2**30, child.returncode)


def step_report(run_dir: Path) -> list[str]:
    """Per step: the reward mix of its attempts (1 / 0.25 / 0 for the demo), groups trained of launched,
    token entropy, advantage spread and gradient norm: what says whether a run learns or stalls."""
    metrics = {}
    if (run_dir / "metrics.jsonl").is_file():
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            m = json.loads(line)
            if "loss" in m:
                metrics[m["step"]] = m
    db = run_dir / "store.db"
    rewards: dict[int, list[float]] = {}
    if db.is_file():
        with contextlib.closing(sqlite3.connect(db)) as con:
            for step, value in con.execute(
                    "SELECT r.step, w.value FROM rollouts r JOIN rewards w ON w.rollout_id = r.id "
                    "WHERE w.name = 'final' AND r.step IS NOT NULL"):
                rewards.setdefault(int(step), []).append(float(value))
    lines = []
    for step in sorted(metrics):
        m = {k: (0 if v is None else v) for k, v in metrics[step].items()}
        vals = rewards.get(step, [])
        mix = Counter(vals)
        launched = m.get("count/dynamic.groups", 0) + m.get("count/dynamic.extra_groups", 0)
        lines.append(
            f"    step {step}: attempts {len(vals)} (1.0: {mix[1.0]}, 0.25: {mix[0.25]}, 0: {mix[0.0]}) "
            f"groups trained {m.get('count/groups.trained', 0)}/{launched} "
            + ("(held) " if m.get("count/explore.held") else "")
            + (f"replayed {m['count/replay.rollouts']} " if "count/replay.rollouts" in m else "")
            + f"entropy {m.get('entropy', 0):.2f} adv std {m.get('advantage/std', 0):.2f} "
            f"grad norm {m.get('grad_norm', 0):.2f} train {m.get('time/step_s', 0):.0f}s "
            f"peak {m.get('memory/peak_rss_gb', 0):.2f}GiB")
    return lines


def _stats(name: str, values: list[float], fmt: str) -> str:
    vals = [v for v in values if v == v]
    if not vals:
        return f"{name}: n/a"
    return f"{name}: min {fmt.format(min(vals))}  median {fmt.format(statistics.median(vals))}  " \
           f"max {fmt.format(max(vals))}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "examples/demo/config.toml"))
    ap.add_argument("--seeds", type=int, nargs="*", help="seeds to run (default: 0 .. n-1)")
    ap.add_argument("--n", type=int, default=10, help="number of seeds when --seeds is not given")
    ap.add_argument("--out", help="folder for the runs and their logs (default: a temporary folder)")
    ap.add_argument("--gain", type=float, default=0.3, help="held-out gain that counts as learning")
    ap.add_argument("--steps", action="store_true", help="after each seed, its per-step reward mix and diagnostics")
    ap.add_argument("--report", help="only print the per-step report of an existing run directory")
    args = ap.parse_args()
    if args.report:
        print("\n".join(step_report(Path(args.report))))
        return 0
    seeds = args.seeds if args.seeds else list(range(args.n))
    out = Path(args.out or tempfile.mkdtemp(prefix="demo_seeds_")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"{Path(args.config).name}, seeds {seeds}, runs and logs in {out}\non {cpu_line()}", flush=True)
    print(f"{'seed':>4}  {'held-out':>13}  {'gain':>6}  {'wall':>7}  {'peak RSS':>8}  {'tree peak':>9}", flush=True)
    runs: list[SeedRun] = []
    for seed in seeds:
        r = run_seed(Path(args.config).resolve(), seed, out, out / f"seed_{seed}.log")
        runs.append(r)
        flag = "" if r.exit_code == 0 else f"  (exit {r.exit_code}, see {out / f'seed_{seed}.log'})"
        print(f"{seed:>4}  {r.before:5.2f} -> {r.after:4.2f}  {r.gain:+6.2f}  {r.wall_s / 60:5.1f}m  "
              f"{r.peak_gb:5.2f}GiB  {r.tree_peak_gb:6.2f}GiB{flag}", flush=True)
        if args.steps:
            print("\n".join(step_report(out / f"seed_{seed}")), flush=True)
    learned = sum(r.gain >= args.gain for r in runs)
    print(f"learned (held-out gain >= {args.gain}): {learned} of {len(runs)}")
    print(_stats("gain", [r.gain for r in runs], "{:+.2f}"))
    print(_stats("wall minutes", [r.wall_s / 60 for r in runs], "{:.1f}"))
    print(_stats("peak RSS GiB (harnessrl train)", [r.peak_gb for r in runs], "{:.2f}"))
    print(_stats("peak RSS GiB (with agents and verifiers)", [r.tree_peak_gb for r in runs], "{:.2f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
