"""``harnessrl purge``: apply retention to a store. A dry run by default; ``--yes`` deletes.

Which retention a run gets: ``--older-than`` when given; else the run's own ``[store] retention`` (recorded
with the run when it started: that is the per-run setting); else the global one, the ``[store] retention``
of ``--config``. A run with none of them is kept. Rollouts without a run (a gateway used on its own) get
``--older-than`` or the global retention. What a purge removes and keeps: ``harnessrl/store/retention.py``
and docs/retention.md.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """``harnessrl purge`` on the CLI's subparsers."""
    p = sub.add_parser(
        "purge", help="apply retention: empty old calls' text and tokens (dry run unless --yes)"
    )
    p.add_argument("--db", help="store URL (default: the store of --config)")
    p.add_argument(
        "--config", help="TOML config: its [store] url, and its [store] retention as the global one"
    )
    p.add_argument("--older-than", metavar="AGE", help="purge rollouts finished longer ago than AGE (30d, 12h, ...), "
                   "overriding every retention setting")  # fmt: skip
    p.add_argument("--run", action="append", default=[], help="only this run (repeatable)")
    p.add_argument("--end-run", action="store_true",
                   help="with --run and --yes: first mark those runs ended (they will not be resumed)")  # fmt: skip
    p.add_argument("--yes", action="store_true", help="really purge (default: only say what would go)")
    p.add_argument("--vacuum", action="store_true",
                   help="SQLite: afterwards rewrite the file to give space back (needed once for files made "
                   "before retention existed; writers wait meanwhile)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.config import ConfigError, load_config
    from harnessrl.purge import purge, report, targets
    from harnessrl.store import open_store
    from harnessrl.store.retention import parse_duration

    global_retention, db = None, args.db
    if args.config:
        try:
            config = load_config(args.config)
        except ConfigError as exc:
            raise SystemExit(str(exc)) from None
        global_retention, db = config.store.retention, db or config.store_url
    if not db:
        raise SystemExit("no store: pass --db sqlite:///path.db (or postgresql://...) or --config FILE.toml")
    if args.older_than is not None:
        try:
            parse_duration(args.older_than)
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    if args.end_run and not args.run:
        raise SystemExit("--end-run needs --run ID: say which runs are over")
    try:
        store = open_store(db)
    except Exception as exc:
        raise SystemExit(f"cannot open the store {db!r}: {exc}") from None
    try:
        runs = store.list_runs()
        if args.run:
            missing = sorted(set(args.run) - {r.id for r in runs})
            if missing:
                raise SystemExit(f"no such run in the store: {', '.join(missing)}")
            runs = [r for r in runs if r.id in set(args.run)]
        plan, unset = targets(runs, older_than=args.older_than, global_retention=global_retention,
                              runless=not args.run)  # fmt: skip
        if not plan:
            raise SystemExit(
                "no retention applies: set [store] retention in --config, or pass --older-than 30d"
            )
        if args.end_run and args.yes:
            for run in runs:
                store.end_run(run.id)
        elif args.end_run:
            print("dry run: --end-run would first mark these runs ended: " + ", ".join(r.id for r in runs))
        for line in report(purge(store, plan, dry_run=not args.yes), unset, dry_run=not args.yes):
            print(line)
        if args.yes and (message := store.reclaim_space(full=args.vacuum)):
            print(message)
    finally:
        store.close()
    return 0
