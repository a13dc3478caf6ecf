"""``harnessrl rollouts --db URL``: list rollouts as a terminal table, filtered and paged."""

from __future__ import annotations

import argparse
from typing import Any

from harnessrl.entrypoints.common import STATUSES, console, open_db


def add_parser(sub: Any) -> None:
    r = sub.add_parser("rollouts", help="list rollouts as a table")
    r.add_argument("--db", required=True, help="store: a URL, a database file or a run directory")
    r.add_argument("--run", help="only this run")
    r.add_argument("--status", choices=STATUSES, help="only this status")
    r.add_argument("--step", type=int, help="only this step")
    r.add_argument("--task", help="only this task")
    r.add_argument("--failure", choices=["agent", "infra"], help="only this failure kind")
    r.add_argument("--limit", type=int, default=50, help="rows to show (default 50)")
    r.add_argument("--offset", type=int, default=0, help="rows to skip (a multiple of --limit)")
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.inspection.rollout_pages import Filters
    from harnessrl.inspection.terminal import print_rollouts
    from harnessrl.types import FailureKind, RolloutStatus

    if args.limit < 1 or args.offset < 0 or args.offset % args.limit:
        raise SystemExit("--limit must be >= 1 and --offset a multiple of --limit")
    f = Filters(run=args.run, step=args.step, task=args.task,
                status=RolloutStatus(args.status) if args.status else None,
                failure=FailureKind(args.failure) if args.failure else None)
    f.page = args.offset // args.limit
    store = open_db(args)
    try:
        print_rollouts(store, f, args.limit, console())
    finally:
        store.close()
    return 0
