"""``harnessrl eval CONFIG``: checkpoints x harnesses x k attempts on a task set, with pass@k (docs/eval.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harnessrl.entrypoints.common import add_set_option, drive, train_config


def add_parser(sub: Any) -> None:
    c = sub.add_parser("eval", help="pass@1 / pass@k of checkpoints x harnesses on a task set (resumable)")
    c.add_argument("config", help="TOML config file ([eval], [harnesses.<name>]; docs/eval.md)")
    c.add_argument("--checkpoint", action="append", metavar="PATH",
                   help='"base", a checkpoint folder or a run directory (its newest step); repeat for several. '
                   "Default: [eval] checkpoints")
    c.add_argument("--harness", action="append", metavar="NAME",
                   help="a [harnesses.<name>] section; repeat for several. Default: [eval] harnesses, else all")
    c.add_argument("--run-dir", help="the eval's directory (rerun it to resume); default: [run] dir")
    c.add_argument("--out", type=Path, metavar="REPORT.md", help="also write the report as Markdown, with a PNG plot")
    add_set_option(c)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harnessrl.drivers.eval import evaluate
    from harnessrl.evaluation.plan import EvalChanged
    from harnessrl.evaluation.report import print_report, write_report

    config = train_config(args)
    try:
        summary = drive("eval", lambda: evaluate(config, args.checkpoint, args.harness))
    except (EvalChanged, FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"harnessrl eval: {exc}") from None
    console = Console()
    if not console.is_terminal:  # a log or pipe: the table at full width, not folded to 80 columns
        console = Console(width=200)
    if summary.launched == 0:
        console.print(f"every attempt was already recorded in {summary.eval_dir}: nothing was run")
    print_report(summary.figures, console, summary.temperature)
    console.print(f"eval run {summary.run_id} in {summary.eval_dir} (dashboard: harnessrl ui --db {summary.eval_dir}, "
                  f"then /evals/{summary.run_id})")
    if args.out is not None:
        png = write_report(summary.figures, args.out, temperature=summary.temperature,
                           title=f"harnessrl eval {summary.run_id}")
        console.print(f"report: {args.out} (plot {png})")
    return 0
