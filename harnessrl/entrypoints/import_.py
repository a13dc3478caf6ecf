"""``harnessrl import FILE --into CONFIG|URL``: an export, conversations or another store's run into a store
(what the import does: ``harnessrl/importer.py``; the format: docs/trajectory-format.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _target(into: str) -> tuple[str, str | None]:
    """(store URL, policy model spec) of ``--into``: a TOML config, or a store URL."""
    if into.endswith(".toml"):
        from harnessrl.config import ConfigError, load_config

        try:
            config = load_config(into)
        except ConfigError as exc:
            raise SystemExit(str(exc)) from None
        return config.store_url, config.engine.model
    if "://" not in into:
        raise SystemExit(f"--into {into!r}: give a config file (CONFIG.toml) or a store URL (sqlite:///path.db)")
    return into, None


def run(args: argparse.Namespace) -> int:
    from harnessrl.atif.read import import_atif, is_atif
    from harnessrl.importer import ImportFormatError, import_file, import_run
    from harnessrl.store import open_store

    url, model = _target(args.into)
    store = open_store(url)
    try:
        if args.from_run:
            spec = args.tokenizer or model
            if spec is None:
                raise ImportFormatError("re-tokenizing a run needs the student's tokenizer: --into CONFIG or --tokenizer")
            from harnessrl.models import load_tokenizer

            source = open_store(args.file)
            try:
                report = import_run(source, args.from_run, store, load_tokenizer(spec), model=spec, dest_run_id=args.run)
            finally:
                source.close()
        elif is_atif(args.file):
            report = import_atif(store, args.file, tokenizer_spec=args.tokenizer or model, run_id=args.run)
        else:
            report = import_file(store, args.file, tokenizer_spec=args.tokenizer or model, run_id=args.run)
    except (ImportFormatError, FileNotFoundError) as exc:
        raise SystemExit(f"harnessrl import: {exc}") from None
    finally:
        store.close()
    print(report.line(), file=sys.stderr, flush=True)
    return 0


def add_parser(sub: Any) -> None:
    """``harnessrl import`` on the CLI's subparsers (docs/trajectory-format.md)."""
    p = sub.add_parser("import", help="load a harnessrl export, ATIF trajectories or a JSONL of OpenAI-style "
                       "conversations into a store")
    p.add_argument("file", help="an export (.parquet / .jsonl), ATIF trajectories (.json, a folder of them, or "
                   "a Harbor job folder), a conversations .jsonl, or with --from-run a store URL")
    p.add_argument("--into", required=True, help="CONFIG.toml (its store; its [engine] model tokenizes "
                   "conversations) or a store URL")
    p.add_argument("--tokenizer", help="model spec whose chat template tokenizes conversations (default: the "
                   "config's [engine] model)")
    p.add_argument("--run", help="run id to create for the imported rollouts (default import-<hex>)")
    p.add_argument("--from-run", metavar="RUN", help="re-tokenize this run of the store FILE (traces of another "
                   "model: its chat conversations, rendered with the student's template)")
    p.set_defaults(func=run)
