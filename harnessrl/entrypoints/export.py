"""``harnessrl export --db URL --out FILE``: the samples (token ids, loss masks, logprobs, rewards) as a dataset;
``--format atif --out DIR``: each rollout as an ATIF trajectory (``harnessrl/atif/``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harnessrl.entrypoints.common import STATUSES, open_db


def add_parser(sub: Any) -> None:
    e = sub.add_parser("export", help="write the samples (token ids, loss masks, logprobs, rewards) as a dataset")
    e.add_argument("--db", required=True, help="store: a URL, a database file or a run directory")
    e.add_argument("--format", choices=["parquet", "jsonl", "atif"], default="parquet",
                   help="atif: one Harbor ATIF trajectory (JSON) per rollout, written into the folder --out")
    e.add_argument("--out", required=True, help="output file (a folder for --format atif)")
    e.add_argument("--run", help="only this run")
    e.add_argument("--status", choices=STATUSES, help="only rollouts with this status (e.g. succeeded)")
    e.add_argument("--redact", action="append", default=[], help="extra regex to redact in text fields (repeatable)")
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.export import export
    from harnessrl.store import NotFound
    from harnessrl.types import RolloutStatus

    store = open_db(args)
    status = RolloutStatus(args.status) if args.status else None
    try:
        if args.format == "atif":
            from harnessrl.atif.write import export_atif

            n = export_atif(store, args.out, run_id=args.run, status=status, redact=args.redact)
        else:
            n = export(store, args.out, args.format, run_id=args.run, status=status, redact=args.redact)
    except (NotFound, NotADirectoryError) as exc:
        raise SystemExit(str(exc)) from None
    except ImportError as exc:
        raise SystemExit(f"{exc}: parquet export needs pyarrow (pip install 'harnessrl[export]')") from None
    finally:
        store.close()
    what = "ATIF trajectories" if args.format == "atif" else "samples"
    print(f"exported {n} {what} to {args.out}", file=sys.stderr, flush=True)
    return 0
