"""``harnessrl train CONFIG``: train the configured harness with RL, resuming the run directory."""

from __future__ import annotations

import argparse
from typing import Any

from harnessrl.entrypoints.common import add_set_option, drive, train_config


def add_parser(sub: Any) -> None:
    t = sub.add_parser("train", help="train the configured harness with RL (resumes a run directory)")
    t.add_argument("config", help="TOML config file")
    t.add_argument("--run-dir", help="run directory (default: [run] dir of the config)")
    t.add_argument("--steps", type=int, help="override [run] steps")
    t.add_argument("--seed", type=int, help="override [run] seed (task order, sampling, trainer RNGs)")
    add_set_option(t)
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.drivers.rl import run_train

    config = train_config(args)
    summary = drive("train", lambda: run_train(config))
    print("\n".join([summary.held_out_line(), *summary.cost_lines()]), flush=True)
    return 0
