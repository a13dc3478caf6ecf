"""What several commands share: the run config with its CLI overrides, one-line errors, the store, a console."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

    from harnessrl.config import HarnessConfig
    from harnessrl.store import Store

T = TypeVar("T")


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` on a command that reads a run config: any key, checked like one in the file."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set any config key, e.g. --set training.lora.r=8 (repeatable; VALUE is a TOML value "
                        "or else a string; a path is relative to the working directory; docs/training.md)")


def train_config(args: argparse.Namespace) -> HarnessConfig:
    """The config file with each ``--set`` applied, then ``--run-dir``, ``--steps`` and ``--seed`` (the flags
    are ``--set run.dir=...`` etc. by another name); a bad file or key exits with its error."""
    from harnessrl.config import ConfigError, at_key, load_config, merge, parse_setting

    flags = {"run_dir": "run.dir", "steps": "run.steps", "seed": "run.seed"}
    overrides: dict[str, Any] = {}
    try:
        for setting in getattr(args, "set", None) or []:
            merge(overrides, parse_setting(setting))
        for flag, key in flags.items():
            if getattr(args, flag, None) not in (None, ""):
                merge(overrides, at_key(key, getattr(args, flag)))
        return load_config(args.config, overrides)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def drive(name: str, job: Callable[[], T]) -> T:
    """Run a train/collect job: the user's errors and Ctrl-C become one line, not a traceback."""
    from harnessrl.drivers.rl import RUN_ERRORS

    try:
        return job()
    except RUN_ERRORS as exc:
        raise SystemExit(f"harnessrl {name}: {exc}") from None
    except KeyboardInterrupt:
        print(f"harnessrl {name}: interrupted; attempts in flight were stopped"
              + (" and will be re-run. Run the same command to resume." if name == "train" else "."),
              file=sys.stderr, flush=True)
        raise SystemExit(130) from None


def store_url(db: str) -> str:
    """``--db`` as a store URL: a URL is kept; a path to a database file, or to a run directory holding
    ``store.db`` (what `harnessrl train` prints), becomes ``sqlite:///<absolute path>``."""
    if "://" in db:
        return db
    path = Path(db).expanduser()
    if path.is_dir():
        if not (path / "store.db").is_file():
            raise SystemExit(f"--db {db!r} is a directory without a store.db: pass the run directory a "
                             "run wrote, a database file, or a URL (sqlite:///path.db, postgresql://...)")
        path = path / "store.db"
    elif not path.is_file():
        raise SystemExit(f"--db {db!r}: no such file (pass a database file, a run directory, or a URL such "
                         "as sqlite:///path.db or postgresql://user@host/db)")
    return f"sqlite:///{path.resolve()}"


def open_db(args: argparse.Namespace) -> Store:
    """``--db``'s store (a URL, a database file or a run directory); one that cannot be opened exits with
    the reason. ``args.db`` becomes the URL, for the commands that pass it on."""
    from harnessrl.store import open_store

    args.db = store_url(args.db)
    try:
        return open_store(args.db)
    except Exception as exc:
        raise SystemExit(f"cannot open the store {args.db!r}: {exc}") from None


def console() -> Console:
    """Terminal width in a terminal; wide when piped, so tables are not squeezed into 80 columns."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


#: ``--status`` choices of the commands that filter rollouts.
STATUSES = ["queued", "running", "succeeded", "failed", "timed_out", "cancelled"]
