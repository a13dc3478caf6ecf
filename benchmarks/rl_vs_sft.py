"""RL against SFT on the same data, and against RFT at an equal sampling budget: same base model, same
held-out set, per seed (issue 35, item 1).

For each config (default: the demo and the tools example) and seed, three arms run one after another,
each a real ``harnessrl`` command in its own process:

- ``rl``: ``harnessrl train CONFIG --seed S`` as configured;
- ``sft``: ``harnessrl sft`` on the successful rollouts (outcome reward >= ``--min-reward``) that this RL run
  itself recorded in training: the same calls, the same tokens; as many optimizer steps as the RL run
  took, ``--rollouts-per-step`` rollouts each;
- ``rft``: as many base-model attempts as the RL run sampled in training, at its training temperature
  (``harnessrl collect --split train`` repeated over the training tasks), the best attempt per task kept
  when it reaches ``--min-reward``, then ``harnessrl sft`` with the same steps.

The untrained model's held-out reward is measured once per seed by the RL run (greedy, so it is the same
for every arm); SFT and RFT evaluate after training only. Prints per arm and seed: held-out before ->
after, model calls sampled (RL and RFT: their own attempts; SFT: none, it reuses RL's), tokens trained,
CPU-seconds of the arm's processes (children's rusage), and the peak resident memory of its largest
process; then min / median / max per arm.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/rl_vs_sft.py --seeds 0 1 2 3 4 --out /tmp/rl_vs_sft
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/rl_vs_sft.py --configs examples/demo/config.toml --seeds 0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_seeds import HELD_OUT, _peak_hwm  # noqa: E402
from run_config import write_run_config  # noqa: E402

from harnessrl.bf16 import cpu_line  # noqa: E402
from harnessrl.config import _absolute_files  # noqa: E402

ARMS = ("rl", "sft", "rft")


@dataclass
class Arm:
    arm: str
    seed: int
    before: float = math.nan
    after: float = math.nan
    calls: int = 0  # model calls sampled by this arm
    attempts: int = 0
    tokens_trained: int = 0
    cpu_s: float = 0.0
    peak_gb: float = 0.0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def run(cmd: list[str], log: Path, arm: Arm) -> str:
    """One harnessrl command; its CPU (children's rusage), wall time and peak RSS are added to ``arm``.
    Returns what this command printed (the log holds every command of the seed)."""
    start = log.stat().st_size if log.exists() else 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        child = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                                 env={**os.environ, "HF_HUB_OFFLINE": "1"})
        proc = psutil.Process(child.pid)
        peak = 0
        while child.poll() is None:
            peak = max(peak, _peak_hwm(proc))
            time.sleep(0.5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    arm.cpu_s += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    arm.wall_s += time.perf_counter() - t0
    arm.peak_gb = max(arm.peak_gb, peak / 2**30)
    if child.returncode != 0:
        raise RuntimeError(f"{cmd[3]} exited {child.returncode}: see {log}")
    with log.open() as f:
        f.seek(start)
        return f.read()


FINAL_ONLY = re.compile(r"held-out reward: ([0-9.]+) \(\d+ tasks; no baseline")


def held_out(text: str) -> tuple[float, float]:
    m = HELD_OUT.findall(text)
    if not m:
        only = FINAL_ONLY.findall(text)
        return math.nan, (float(only[-1]) if only else math.nan)
    a, b = m[-1]
    return (math.nan if a == "n/a" else float(a)), (math.nan if b == "n/a" else float(b))


def tokens_trained(run_dir: Path) -> int:
    total = 0
    if (run_dir / "metrics.jsonl").is_file():
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            total += int(json.loads(line).get("tokens/trained") or 0)
    return total


def run_id(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["run_id"])


def sampled(db: Path, run_ids: list[str], training_only: bool) -> tuple[int, int, int]:
    """(attempts, model calls, optimizer steps) of ``run_ids`` in the store at ``db``."""
    marks = ",".join("?" * len(run_ids))
    where = f"r.run_id IN ({marks})" + (" AND r.step IS NOT NULL" if training_only else "")
    with contextlib.closing(sqlite3.connect(db)) as con:
        attempts = con.execute(f"SELECT COUNT(*) FROM rollouts r WHERE {where}", run_ids).fetchone()[0]
        calls = con.execute(f"SELECT COUNT(*) FROM calls c JOIN rollouts r ON c.rollout_id = r.id WHERE {where}",
                            run_ids).fetchone()[0]
        steps = con.execute(f"SELECT COUNT(DISTINCT r.step) FROM rollouts r WHERE {where}", run_ids).fetchone()[0]
    return int(attempts), int(calls), int(steps)


def derived(config: Path, out: Path, changes: dict[str, dict[str, Any]]) -> Path:
    """The config with its relative paths made absolute and ``changes`` merged per section, written to ``out``."""
    data = tomllib.loads(config.read_text())
    base = config.parent.resolve()
    for section, key in (("tasks", "train"), ("tasks", "eval")):
        if isinstance(data.get(section, {}).get(key), str):
            data[section][key] = str((base / data[section][key]).resolve())
    for section, key in (("runner", "command"), ("rewards", "verifier")):
        if isinstance(data.get(section, {}).get(key), list):
            data[section][key] = _absolute_files(data[section][key], base)
    runner = data.get("runner", {})
    if isinstance(runner.get("sandbox_read_only"), list):
        runner["sandbox_read_only"] = [str((base / str(p)).resolve()) for p in runner["sandbox_read_only"]]
    data.get("run", {}).pop("dir", None)  # each arm names its own (--run-dir)
    for section, values in changes.items():
        data.setdefault(section, {}).update(values)
    return write_run_config(out, data)


def one_seed(config: Path, seed: int, out: Path, args: argparse.Namespace) -> list[Arm]:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    name = config.parent.name
    rl = Arm("rl", seed)
    rl_dir = out / "rl"
    text = run([sys.executable, "-m", "harnessrl.cli", "train", str(config), "--seed", str(seed),
                "--run-dir", str(rl_dir)], log, rl)
    rl.before, rl.after = held_out(text)
    rl_run = run_id(rl_dir)
    rl.attempts, rl.calls, steps = sampled(rl_dir / "store.db", [rl_run], training_only=True)
    rl.tokens_trained = tokens_trained(rl_dir)
    arms = [rl]
    data = tomllib.loads(config.read_text())
    temperature = data.get("run", {}).get("train_temperature", 1.0)
    sft_steps = args.sft_steps or max(1, steps)
    sft_common = {"min_reward": args.min_reward, "steps": sft_steps, "rollouts_per_step": args.rollouts_per_step}

    if "sft" in args.arms:
        sft = Arm("sft", seed, before=rl.before)
        cfg = derived(config, out / "sft_cfg", {
            "run": {"name": f"{name}-sft", "eval_at_start": False},
            "sft": {**sft_common, "store": f"sqlite:///{rl_dir / 'store.db'}", "runs": [rl_run], "split": "train"}})
        sft_dir = out / "sft"
        _, sft.after = held_out(run([sys.executable, "-m", "harnessrl.cli", "sft", str(cfg), "--seed", str(seed),
                                     "--run-dir", str(sft_dir)], log, sft))
        sft.tokens_trained = tokens_trained(sft_dir)
        with contextlib.closing(sqlite3.connect(rl_dir / "store.db")) as con:
            kept = con.execute(
                "SELECT COUNT(*) FROM rollouts r JOIN rewards w ON w.rollout_id = r.id WHERE r.run_id = ? AND "
                "r.step IS NOT NULL AND w.name = 'final' AND w.value >= ?", [rl_run, args.min_reward]).fetchone()[0]
        sft.notes.append(f"{kept} successful RL rollouts")
        arms.append(sft)

    if "rft" in args.arms:
        rft = Arm("rft", seed, before=rl.before)
        rft_dir = out / "rft_collect"
        train_file = (config.parent / data["tasks"]["train"]).resolve()
        n_train = sum(1 for line in train_file.read_text().splitlines() if line.strip())
        left, ids = rl.attempts, []
        while left > 0:
            batch = min(left, n_train)
            cfg = derived(config, out / f"rft_cfg_{len(ids)}", {
                "run": {"name": f"{name}-rft", "eval_tasks": batch, "eval_temperature": temperature,
                        "seed": seed * 1000 + len(ids)}})
            run([sys.executable, "-m", "harnessrl.cli", "collect", str(cfg), "--split", "train",
                 "--run-dir", str(rft_dir)], log, rft)
            left -= batch
            with contextlib.closing(sqlite3.connect(rft_dir / "store.db")) as con:
                ids = [r[0] for r in con.execute("SELECT id FROM runs ORDER BY created_at")]
        rft.attempts, rft.calls, _ = sampled(rft_dir / "store.db", ids, training_only=False)
        cfg = derived(config, out / "rft_sft_cfg", {
            "run": {"name": f"{name}-rft-sft", "eval_at_start": False},
            "sft": {**sft_common, "store": f"sqlite:///{rft_dir / 'store.db'}", "runs": ids, "split": "any",
                    "best_k": 1}})
        sft_dir = out / "rft"
        _, rft.after = held_out(run([sys.executable, "-m", "harnessrl.cli", "sft", str(cfg), "--seed", str(seed),
                                     "--run-dir", str(sft_dir)], log, rft))
        rft.tokens_trained = tokens_trained(sft_dir)
        with contextlib.closing(sqlite3.connect(rft_dir / "store.db")) as con:
            solved = con.execute(
                f"SELECT COUNT(DISTINCT r.task_id) FROM rollouts r JOIN rewards w ON w.rollout_id = r.id WHERE "
                f"r.run_id IN ({','.join('?' * len(ids))}) AND w.name = 'final' AND w.value >= ?",
                [*ids, args.min_reward]).fetchone()[0]
        rft.notes.append(f"{len(ids)} collections, best of k kept for {solved} tasks")
        arms.append(rft)
    return arms


def line(a: Arm) -> str:
    return (f"{a.arm:>4} {a.seed:>4}  {a.before:5.2f} -> {a.after:4.2f}  {a.after - a.before:+6.2f}  "
            f"{a.attempts:>8} {a.calls:>6}  {a.tokens_trained:>9}  {a.cpu_s:8.0f}  {a.wall_s / 60:6.1f}  "
            f"{a.peak_gb:6.2f}  {'; '.join(a.notes)}")


def _stats(values: list[float], fmt: str) -> str:
    vals = [v for v in values if v == v]
    return "n/a" if not vals else \
        f"{fmt.format(min(vals))} / {fmt.format(statistics.median(vals))} / {fmt.format(max(vals))}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=[str(ROOT / "examples/demo/config.toml"),
                                                      str(ROOT / "examples/tools/config.toml")])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS, help="rl always runs (the others use it)")
    ap.add_argument("--min-reward", type=float, default=1.0, help="outcome reward an SFT/RFT rollout needs")
    ap.add_argument("--sft-steps", type=int, help="SFT/RFT optimizer steps (default: as many as the RL run took)")
    ap.add_argument("--rollouts-per-step", type=int, default=16)
    ap.add_argument("--out", help="folder for the runs and their logs (default: a temporary folder)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="rl_vs_sft_")).resolve()
    print(f"runs and logs in {out}; {cpu_line()}", flush=True)
    for config in map(lambda c: Path(c).resolve(), args.configs):
        print(f"\n{config}", flush=True)
        print(f"{'arm':>4} {'seed':>4}  {'held-out':>13}  {'gain':>6}  {'attempts':>8} {'calls':>6}  "
              f"{'tokens':>9}  {'CPU-s':>8}  {'min':>6}  {'GiB':>6}", flush=True)
        arms: list[Arm] = []
        for seed in args.seeds:
            try:
                got = one_seed(config, seed, out / config.parent.name / f"seed_{seed}", args)
            except RuntimeError as exc:
                print(f"seed {seed}: {exc}", flush=True)
                continue
            for a in got:
                print(line(a), flush=True)
            arms += got
        print("min / median / max per arm:")
        for name in ARMS:
            mine = [a for a in arms if a.arm == name]
            if mine:
                print(f"  {name}: after {_stats([a.after for a in mine], '{:.2f}')}; gain "
                      f"{_stats([a.after - a.before for a in mine], '{:+.2f}')}; calls "
                      f"{_stats([a.calls for a in mine], '{:.0f}')}; tokens "
                      f"{_stats([a.tokens_trained for a in mine], '{:.0f}')}; CPU-s "
                      f"{_stats([a.cpu_s for a in mine], '{:.0f}')}; GiB {_stats([a.peak_gb for a in mine], '{:.2f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
