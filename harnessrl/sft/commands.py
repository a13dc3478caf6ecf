"""``harnessrl sft`` on the command line (kept apart from ``run`` so building the parser loads no torch)."""

from __future__ import annotations

from typing import Any


def cmd_sft(args: Any) -> int:
    from harnessrl.cli import _drive, _train_config
    from harnessrl.sft.run import SftError, run_sft

    config = _train_config(args)
    try:
        summary = _drive("sft", lambda: run_sft(config))
    except SftError as exc:
        raise SystemExit(f"harnessrl sft: {exc}") from None
    print(summary.held_out_line(), flush=True)
    return 0


def add_parser(sub: Any) -> None:
    """``harnessrl sft`` on the CLI's subparsers (docs/sft.md)."""
    p = sub.add_parser("sft", help="train the policy on recorded rollouts selected by [sft] (resumes a run directory)")
    p.add_argument("config", help="TOML config file with an [sft] section")
    p.add_argument("--run-dir", help="run directory (default: [run] dir of the config)")
    p.add_argument("--seed", type=int, help="override [run] seed (rollout order, trainer RNGs)")
    p.set_defaults(func=cmd_sft)
