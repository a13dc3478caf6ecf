"""``harnessrl show ROLLOUT --db URL``: one rollout in the terminal (rewards, calls, samples, logs)."""

from __future__ import annotations

import argparse
from typing import Any

from harnessrl.entrypoints.common import console, open_db


def add_parser(sub: Any) -> None:
    s = sub.add_parser("show", help="one rollout: rewards, calls, samples, logs")
    s.add_argument("rollout", help="rollout id")
    s.add_argument("--db", required=True, help="store URL")
    s.add_argument("--log-lines", type=int, default=40, help="how many last log lines to print")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.inspection.terminal import print_rollout
    from harnessrl.store import NotFound

    store = open_db(args)
    try:
        print_rollout(store, args.rollout, console(), log_lines=args.log_lines)
    except NotFound as exc:
        raise SystemExit(str(exc)) from None
    finally:
        store.close()
    return 0
