"""``harnessrl collect CONFIG``: run a split's tasks without training and print the mean reward."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harnessrl.entrypoints.common import add_set_option, drive, train_config


def add_parser(sub: Any) -> None:
    c = sub.add_parser("collect", help="run tasks without training and print the mean reward")
    c.add_argument("config", help="TOML config file")
    c.add_argument("--checkpoint", help="checkpoint folder (runs/.../checkpoints/step_N); default: the base model")
    c.add_argument("--split", choices=["eval", "train"], default="eval", help="which tasks to run")
    c.add_argument("--run-dir", help="run directory for the collected rollouts")
    add_set_option(c)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.drivers.rl import run_collect
    from harnessrl.types import TaskSplit

    checkpoint = Path(args.checkpoint).resolve() if args.checkpoint else None
    if checkpoint is not None and not checkpoint.is_dir():
        raise SystemExit(f"checkpoint not found: {checkpoint}")
    config = train_config(args)
    result = drive("collect", lambda: run_collect(config, checkpoint, TaskSplit(args.split)))
    print(f"{args.split} reward: {result.mean_reward:.2f} ({result.tasks} tasks, policy version "
          f"{result.policy_version})", flush=True)
    return 0
