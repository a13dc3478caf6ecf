"""The ``harnessrl`` command line.

``harnessrl gateway --engine http://127.0.0.1:8000/v1 --db sqlite:///harnessrl.db`` serves the recording
gateway. Flags override the ``[gateway]`` / ``[store]`` sections of ``--config FILE.toml``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("harnessrl")


def _start_embedded(engine: Any) -> str:
    """Load the embedded engine (``[engine]`` section of the config) and serve it on loopback."""
    from harnessrl.engines.embedded.server import start_embedded

    server = start_embedded(engine.model_copy(update={"kind": "embedded", "urls": []}))
    return server.base_url


def cmd_gateway(args: argparse.Namespace) -> int:
    import uvicorn

    from harnessrl.config import ConfigError, load_config
    from harnessrl.gateway import Gateway
    from harnessrl.store import open_store
    from harnessrl.ui import mount_dashboard

    flags = {key: getattr(args, key) for key in ("host", "port", "model_name", "render_mode", "public_url", "mode")
             if getattr(args, key) is not None}
    if args.engine:
        flags["engines"] = args.engine
    try:
        harness = load_config(args.config, {"gateway": flags}, gateway_alone=True)
    except ConfigError as exc:  # the message names the file and the bad key
        raise SystemExit(str(exc)) from None
    config = harness.gateway
    if "embedded" in config.engines and "tokenizer" not in config.render.model_fields_set:
        # the gateway decodes stored token IDs (to redact secrets) with the served model's tokenizer
        config.render = config.render.model_copy(update={"tokenizer": harness.engine.model})
    config.engines = [_start_embedded(harness.engine) if e == "embedded" else e for e in config.engines]
    if not config.engines:
        raise SystemExit("no engine configured: pass --engine http://HOST:PORT/v1 (repeatable) or --engine embedded")
    db = args.db or harness.store.url or "sqlite:///harnessrl.db"
    store = open_store(db)
    gateway = Gateway(store, config, production=harness.production)
    mount_dashboard(gateway)
    if gateway.generated_admin_token:
        # Printed to the terminal only (never logged or stored): the controller needs it to create rollouts.
        print(f"harnessrl gateway admin token: {gateway.admin_token}", file=sys.stderr, flush=True)
    log.info("gateway on http://%s:%d -> %s, recording to %s", config.host, config.port,
             ", ".join(config.engines), db)
    try:
        uvicorn.run(gateway.app, host=config.host, port=config.port, log_level=args.log_level.lower(),
                    access_log=False, timeout_keep_alive=60, backlog=4096)
    finally:
        store.close()
    return 0


def _train_config(args: argparse.Namespace) -> Any:
    from harnessrl.config import ConfigError, load_config

    overrides: dict[str, dict[str, Any]] = {}
    if getattr(args, "run_dir", None):
        overrides["run"] = {"dir": str(Path(args.run_dir).resolve())}
    if getattr(args, "steps", None) is not None:
        overrides.setdefault("run", {})["steps"] = args.steps
    if getattr(args, "seed", None) is not None:
        overrides.setdefault("run", {})["seed"] = args.seed
    try:
        return load_config(args.config, overrides)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def _drive(name: str, job: Callable[[], T]) -> T:
    """Run a train/collect job: the user's errors and Ctrl-C become one line, not a traceback."""
    from harnessrl.run import RUN_ERRORS

    try:
        return job()
    except RUN_ERRORS as exc:
        raise SystemExit(f"harnessrl {name}: {exc}") from None
    except KeyboardInterrupt:
        print(f"harnessrl {name}: interrupted; attempts in flight were stopped"
              + (" and will be re-run. Run the same command to resume." if name == "train" else "."),
              file=sys.stderr, flush=True)
        raise SystemExit(130) from None


def cmd_train(args: argparse.Namespace) -> int:
    from harnessrl.run import run_train

    config = _train_config(args)
    summary = _drive("train", lambda: run_train(config))
    print(summary.held_out_line(), flush=True)
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from harnessrl.run import run_collect
    from harnessrl.types import TaskSplit

    checkpoint = Path(args.checkpoint).resolve() if args.checkpoint else None
    if checkpoint is not None and not checkpoint.is_dir():
        raise SystemExit(f"checkpoint not found: {checkpoint}")
    config = _train_config(args)
    result = _drive("collect", lambda: run_collect(config, checkpoint, TaskSplit(args.split)))
    print(f"{args.split} reward: {result.mean_reward:.2f} ({result.tasks} tasks, policy version "
          f"{result.policy_version})", flush=True)
    return 0


def _open_db(args: argparse.Namespace) -> Any:
    from harnessrl.store import open_store

    try:
        return open_store(args.db)
    except Exception as exc:
        raise SystemExit(f"cannot open the store {args.db!r}: {exc}") from None


def cmd_ui(args: argparse.Namespace) -> int:
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
    store = _open_db(args)
    app = dashboard_app(store, token=token, viewer_token=viewer_token, run_dirs=[Path(d) for d in args.run_dir],
                        store_url=args.db, tokenizer=args.tokenizer)
    print(f"harnessrl dashboard on http://{args.host}:{args.port}/", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False)
    finally:
        store.close()
    return 0


def _filters(args: argparse.Namespace) -> Any:
    from harnessrl.inspection.rollout_pages import Filters
    from harnessrl.types import FailureKind, RolloutStatus

    return Filters(run=args.run, step=args.step, task=args.task,
                   status=RolloutStatus(args.status) if args.status else None,
                   failure=FailureKind(args.failure) if args.failure else None)


def _console() -> Any:
    """Terminal width in a terminal; wide when piped, so tables are not squeezed into 80 columns."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def cmd_rollouts(args: argparse.Namespace) -> int:
    from harnessrl.trace import print_rollouts

    if args.limit < 1 or args.offset < 0 or args.offset % args.limit:
        raise SystemExit("--limit must be >= 1 and --offset a multiple of --limit")
    f = _filters(args)
    f.page = args.offset // args.limit
    store = _open_db(args)
    try:
        print_rollouts(store, f, args.limit, _console())
    finally:
        store.close()
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from harnessrl.store import NotFound
    from harnessrl.trace import print_rollout

    store = _open_db(args)
    try:
        print_rollout(store, args.rollout, _console(), log_lines=args.log_lines)
    except NotFound as exc:
        raise SystemExit(str(exc)) from None
    finally:
        store.close()
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from harnessrl.export import export
    from harnessrl.store import NotFound
    from harnessrl.types import RolloutStatus

    store = _open_db(args)
    try:
        n = export(store, args.out, args.format, run_id=args.run,
                   status=RolloutStatus(args.status) if args.status else None, redact=args.redact)
    except NotFound as exc:
        raise SystemExit(str(exc)) from None
    except ImportError as exc:
        raise SystemExit(f"{exc}: parquet export needs pyarrow (pip install 'harnessrl[export]')") from None
    finally:
        store.close()
    print(f"exported {n} samples to {args.out}", file=sys.stderr, flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="harnessrl", description="RL for LLM agents inside their own harness.")
    ap.add_argument("--log-level", default=os.environ.get("HARNESSRL_LOG_LEVEL", "INFO"))
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gateway", help="serve the recording gateway in front of one or more engines")
    g.add_argument("--engine", action="append", default=[],
                   help="engine base URL speaking vLLM's OpenAI dialect (repeatable), or 'embedded'")
    g.add_argument("--db", help="store URL (default sqlite:///harnessrl.db)")
    g.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    g.add_argument("--port", type=int, help="port (default 8400)")
    g.add_argument("--config", help="TOML file with [gateway] and [store] sections")
    g.add_argument("--model-name", help="name /v1/models lists for the served policy")
    g.add_argument("--render-mode", choices=["engine", "gateway"], help="who applies the chat template")
    g.add_argument("--public-url", help="URL harnesses reach the gateway at (for rollout base_url)")
    g.add_argument("--mode", choices=["training", "production"],
                   help="production: also serve deployed applications under /p/<deployment>/v1 ([production])")
    g.set_defaults(func=cmd_gateway)
    t = sub.add_parser("train", help="train the configured harness with RL (resumes a run directory)")
    t.add_argument("config", help="TOML config file")
    t.add_argument("--run-dir", help="run directory (default: [run] dir of the config)")
    t.add_argument("--steps", type=int, help="override [run] steps")
    t.add_argument("--seed", type=int, help="override [run] seed (task order, sampling, trainer RNGs)")
    t.set_defaults(func=cmd_train)
    c = sub.add_parser("collect", help="run tasks without training and print the mean reward")
    c.add_argument("config", help="TOML config file")
    c.add_argument("--checkpoint", help="checkpoint folder (runs/.../checkpoints/step_N); default: the base model")
    c.add_argument("--split", choices=["eval", "train"], default="eval", help="which tasks to run")
    c.add_argument("--run-dir", help="run directory for the collected rollouts")
    c.set_defaults(func=cmd_collect)
    _add_view_commands(sub)
    from harnessrl.purge import add_parser as add_purge_parser  # retention: docs/retention.md

    add_purge_parser(sub)
    from harnessrl.rewards.judge_check import add_parser as add_judge_check_parser  # docs/judges.md

    add_judge_check_parser(sub)
    from harnessrl.importer import add_parser as add_import_parser  # docs/trajectory-format.md

    add_import_parser(sub)
    from harnessrl.sft.commands import add_parser as add_sft_parser  # docs/sft.md

    add_sft_parser(sub)
    return ap


def _add_view_commands(sub: Any) -> None:
    """``ui``, ``rollouts``, ``show``, ``export``: reading the store (dashboard, terminal, dataset)."""
    statuses = ["queued", "running", "succeeded", "failed", "timed_out", "cancelled"]
    u = sub.add_parser("ui", help="serve the dashboard (runs, reward curves, rollouts, call tokens)")
    u.add_argument("--db", required=True, help="store URL (sqlite:///path.db or postgresql://...)")
    u.add_argument("--run-dir", action="append", default=[],
                   help="run directory with metrics.jsonl / events.jsonl (repeatable; found from the store if omitted)")
    u.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=8401, help="port (default 8401)")
    u.add_argument("--tokenizer", help="model spec whose tokenizer decodes tokens (default: the run's engine.model; "
                   "'none' shows ids)")
    u.set_defaults(func=cmd_ui)
    r = sub.add_parser("rollouts", help="list rollouts as a table")
    r.add_argument("--db", required=True, help="store URL")
    r.add_argument("--run", help="only this run")
    r.add_argument("--status", choices=statuses, help="only this status")
    r.add_argument("--step", type=int, help="only this step")
    r.add_argument("--task", help="only this task")
    r.add_argument("--failure", choices=["agent", "infra"], help="only this failure kind")
    r.add_argument("--limit", type=int, default=50, help="rows to show (default 50)")
    r.add_argument("--offset", type=int, default=0, help="rows to skip (a multiple of --limit)")
    r.set_defaults(func=cmd_rollouts)
    s = sub.add_parser("show", help="one rollout: rewards, calls, samples, logs")
    s.add_argument("rollout", help="rollout id")
    s.add_argument("--db", required=True, help="store URL")
    s.add_argument("--log-lines", type=int, default=40, help="how many last log lines to print")
    s.set_defaults(func=cmd_show)
    e = sub.add_parser("export", help="write the samples (token ids, loss masks, logprobs, rewards) as a dataset")
    e.add_argument("--db", required=True, help="store URL")
    e.add_argument("--format", choices=["parquet", "jsonl"], default="parquet")
    e.add_argument("--out", required=True, help="output file")
    e.add_argument("--run", help="only this run")
    e.add_argument("--status", choices=statuses, help="only rollouts with this status (e.g. succeeded)")
    e.add_argument("--redact", action="append", default=[], help="extra regex to redact in text fields (repeatable)")
    e.set_defaults(func=cmd_export)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per admin request drowns the progress
    # transformers 5 renamed gradient checkpointing; peft still calls the old names on every LoRA wrap
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
