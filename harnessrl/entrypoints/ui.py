"""``harnessrl ui --db URL``: serve the dashboard (runs, reward curves, rollouts, call tokens)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from harnessrl.entrypoints.common import open_db


def add_parser(sub: Any) -> None:
    u = sub.add_parser("ui", help="serve the dashboard (runs, reward curves, rollouts, call tokens)")
    u.add_argument("--db", required=True, help="store: a URL (sqlite:///path.db, postgresql://...), a database file or a run directory")
    u.add_argument("--run-dir", action="append", default=[],
                   help="run directory with metrics.jsonl / events.jsonl (repeatable; found from the store if omitted)")
    u.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=8401, help="port (default 8401)")
    u.add_argument("--tokenizer", help="model spec whose tokenizer decodes tokens (default: the run's engine.model; "
                   "'none' shows ids)")
    u.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from harnessrl.ui import dashboard_app

    token = os.environ.get("HARNESSRL_UI_TOKEN") or None
    viewer_token = os.environ.get("HARNESSRL_UI_VIEWER_TOKEN") or None
    if args.host not in ("127.0.0.1", "localhost", "::1") and token is None:
        raise SystemExit(f"refusing to serve the dashboard on {args.host} without a token: anyone who reaches "
                         "it would read every prompt. Set HARNESSRL_UI_TOKEN (operators) and optionally "
                         "HARNESSRL_UI_VIEWER_TOKEN (read-only viewers), or listen on 127.0.0.1")
    if viewer_token and not token:
        raise SystemExit("HARNESSRL_UI_VIEWER_TOKEN needs HARNESSRL_UI_TOKEN (the operators' token) too")
    store = open_db(args)
    app = dashboard_app(store, token=token, viewer_token=viewer_token, run_dirs=[Path(d) for d in args.run_dir],
                        store_url=args.db, tokenizer=args.tokenizer)
    print(f"harnessrl dashboard on http://{args.host}:{args.port}/", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False)
    finally:
        store.close()
    return 0
