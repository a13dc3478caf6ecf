"""``harnessrl sft CONFIG``: train the policy on recorded rollouts selected by ``[sft]`` (docs/sft.md)."""

from __future__ import annotations

import argparse
from typing import Any

from harnessrl.entrypoints.common import add_set_option, drive, train_config


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sft", help="train the policy on recorded rollouts selected by [sft] (resumes a run directory)")
    p.add_argument("config", help="TOML config file with an [sft] section")
    p.add_argument("--run-dir", help="run directory (default: [run] dir of the config)")
    p.add_argument("--seed", type=int, help="override [run] seed (rollout order, trainer RNGs)")
    add_set_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.drivers.sft import SftError, run_sft

    config = train_config(args)
    try:
        summary = drive("sft", lambda: run_sft(config))
    except SftError as exc:
        raise SystemExit(f"harnessrl sft: {exc}") from None
    print("\n".join([summary.held_out_line(), *summary.cost_lines()]), flush=True)
    return 0
