"""The ``harnessrl`` command line: the argparse front that dispatches to one module per command.

Each command lives in ``harnessrl/entrypoints/<command>.py`` (its flags and what it runs); this module only
lists them in help order, sets up logging and calls the chosen one. Building the parser loads no torch.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

from harnessrl.entrypoints import (
    collect,
    eval_,
    export,
    gateway,
    import_,
    judge_check,
    purge,
    rollouts,
    sft,
    show,
    train,
    ui,
)

#: The commands in ``harnessrl --help`` order. eval: docs/eval.md; retention: docs/retention.md; judges: docs/judges.md;
#: import: docs/trajectory-format.md; sft: docs/sft.md.
COMMANDS = (gateway, train, eval_, collect, ui, rollouts, show, export, purge, judge_check, import_, sft)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="harnessrl", description="RL for LLM agents inside their own harness.")
    ap.add_argument("--log-level", default=os.environ.get("HARNESSRL_LOG_LEVEL", "INFO"))
    sub = ap.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per admin request drowns the progress
    # transformers 5 renamed gradient checkpointing; peft still calls the old names on every LoRA wrap
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
