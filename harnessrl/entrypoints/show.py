"""``harnessrl show ID --db URL``: one rollout in the terminal (rewards, calls, samples, logs), or, given a run
id, what the run cost (its steps' and evaluations' cost records, ``harnessrl/run_cost.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.entrypoints.common import console, open_db

if TYPE_CHECKING:
    from rich.console import Console

    from harnessrl.types import Run


def add_parser(sub: Any) -> None:
    s = sub.add_parser("show", help="one rollout: rewards, calls, samples, logs; or a run: what it cost")
    s.add_argument("rollout", help="rollout id, or run id")
    s.add_argument("--db", required=True, help="store: a URL, a database file or a run directory")
    s.add_argument("--log-lines", type=int, default=40, help="how many last log lines to print")
    s.add_argument("--run-dir", action="append", type=Path, default=[],
                   help="a run directory to look in (repeatable; default: the run's configured dir, the store's folder)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.inspection.terminal import print_rollout
    from harnessrl.store import NotFound

    store = open_db(args)
    try:
        try:
            found = store.get_run(args.rollout)
        except NotFound:  # not a run: a rollout
            print_rollout(store, args.rollout, console(), log_lines=args.log_lines)
        else:
            print_run_cost(found, console(), run_dirs=args.run_dir, store_url=args.db)
    except NotFound as exc:
        raise SystemExit(str(exc)) from None
    finally:
        store.close()
    return 0


def print_run_cost(run: Run, out: Console, *, run_dirs: list[Path], store_url: str | None) -> None:
    """A table of each step's and evaluation's cost record, then the totals the run's end printed."""
    from rich.table import Table

    from harnessrl.run_cost import FIELDS, Cost, cost_lines, read_events, run_cost
    from harnessrl.ui.runfiles import find_run_dir

    run_dir = find_run_dir(run, run_dirs, store_url)
    out.print(f"[bold]run {run.id}[/] ({run.name})" + (f" in {run_dir}" if run_dir else ""), highlight=False)
    events = read_events(run_dir / "events.jsonl") if run_dir is not None else []
    cost = run_cost(events)
    if cost is None:
        where = "its events.jsonl" if run_dir is not None else "its run directory (pass --run-dir)"
        out.print(f"no cost recorded: {where} holds no step or evaluation with a cost record", highlight=False)
        return
    table = Table("record", *FIELDS, title="cost per step and held-out evaluation (harnessrl/run_cost.py)")
    for e in events:
        if e.get("event") in ("step", "sft_step", "eval") and isinstance(e.get("cost"), dict):
            c = Cost.from_record(e["cost"])
            label = f"eval v{e.get('policy_version')}" if e["event"] == "eval" else f"step {e.get('step')}"
            table.add_row(label, *(_cell(getattr(c, name), name) for name in FIELDS))
    out.print(table)
    for line in cost_lines(cost):
        out.print(line, highlight=False)


def _cell(v: float | None, name: str) -> str:
    from harnessrl.run_cost import gib, secs

    if v is None:
        return "n/a"
    if name.endswith("_bytes"):
        return gib(int(v))
    return secs(v) if name.endswith("_s") else f"{int(v):,}"
