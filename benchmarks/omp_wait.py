"""The embedded engine's rollout time by OpenMP wait policy, alone and beside another busy process.

torch's OpenMP threads spin before they sleep (libgomp's default, ``GOMP_SPINCOUNT=300000``); harnessrl
makes them sleep at once (``OMP_WAIT_POLICY=PASSIVE``, ``harnessrl/cpu_threads.py``). Each measurement
is its own process (libgomp reads the policy when torch loads): one wave of 24 concurrent two-call demo
attempts (``serve_memory.py --worker``), settings alternated over ``--rounds``. "beside a busy process"
runs a torch loop on every core (another engine, a trainer, a test suite) for the whole measurement.
Prints seconds per run and the medians' ratio, with the load average before each run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/omp_wait.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICIES = {"spin (libgomp default)": {"GOMP_SPINCOUNT": "300000"}, "sleep (harnessrl)": {"OMP_WAIT_POLICY": "PASSIVE"}}
BUSY = (
    "import torch\n"
    "a, w = torch.randn(64, 576), torch.randn(576, 576)\n"
    "while True:\n"
    "    a = torch.tanh(a @ w)\n"
)


def measure(env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, str(HERE / "serve_memory.py"), "--worker", "--waves", "1"],
                         env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conditions", nargs="+", default=["alone", "busy"], choices=["alone", "busy"])
    args = ap.parse_args()
    for condition in args.conditions:
        busy = subprocess.Popen([sys.executable, "-c", BUSY]) if condition == "busy" else None
        try:
            seconds: dict[str, list[float]] = {name: [] for name in POLICIES}
            for _ in range(args.rounds):
                for name, env in POLICIES.items():
                    load = os.getloadavg()[0]
                    seconds[name].append(measure(env))
                    print(f"{condition:>5} | {name:<22} {seconds[name][-1]:7.1f} s (load average {load:.1f})", flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        spin, sleep = (statistics.median(v) for v in seconds.values())
        print(f"{condition:>5} | median: spin {spin:.1f} s, sleep {sleep:.1f} s; sleep takes {sleep / spin:.2f}x the time")


if __name__ == "__main__":
    main()
