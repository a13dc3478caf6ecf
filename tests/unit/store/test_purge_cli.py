"""``harnessrl purge``: a dry run by default, per-run retention, runs that have not ended are kept."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.cli import main
from harnessrl.store import Store, open_store
from harnessrl.types import RolloutStatus as S

from ._helpers import make_call

HOUR = 3600.0


def _rollout(store: Store, run_id: str, db: Path, age_s: float) -> str:
    """A finished rollout of ``run_id`` with two calls, made to look ``age_s`` old."""
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run_id).id
    store.record_calls([make_call(rid, [1, 2, 3], [4, 5])])
    store.record_calls([make_call(rid, [1, 2, 3, 4, 5, 6], [7])])
    store.transition_rollout(rid, S.RUNNING)
    store.transition_rollout(rid, S.SUCCEEDED, logs="log")
    with sqlite3.connect(db) as conn:  # the only way to age a row without waiting
        conn.execute("UPDATE rollouts SET finished_at = finished_at - ? WHERE id = ?", (age_s, rid))
    return rid


def _purged(url: str, rid: str) -> bool:
    with open_store(url) as s:
        return s.get_rollout(rid).purged_at is not None


def test_dry_run_by_default_then_yes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    with open_store(url) as store:
        run = store.create_run("r", {}).id
        rid = _rollout(store, run, db, age_s=2 * HOUR)
        store.end_run(run)
    assert main(["purge", "--db", url, "--older-than", "1h"]) == 0
    out = capsys.readouterr().out
    assert f"run {run} (retention 1h, --older-than): would purge 1 rollouts, 2 calls" in out
    assert "nothing deleted: run again with --yes" in out
    assert not _purged(url, rid)
    assert main(["purge", "--db", url, "--older-than", "1h", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "purged 1 rollouts, 2 calls" in out and "SQLite:" in out and "nothing deleted" not in out
    assert _purged(url, rid)


def test_each_run_gets_its_own_retention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    config = write_run_config(tmp_path, {"store": {"url": url, "retention": "3h"}})
    with open_store(url) as store:
        own = store.create_run("own", {"store": {"retention": "1h"}}).id  # recorded with the run
        glob = store.create_run("global", {"store": {"retention": None}}).id
        live = store.create_run("live", {}).id
        r_own, r_glob, r_live = (_rollout(store, run, db, age_s=2 * HOUR) for run in (own, glob, live))
        store.end_run(own)
        store.end_run(glob)
    assert main(["purge", "--config", str(config), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"run {own} (retention 1h, run config): purged 1 rollouts" in out
    assert f"run {live} (retention 3h, global): purged 0 rollouts, 0 calls; kept 0" not in out
    assert [_purged(url, r) for r in (r_own, r_glob, r_live)] == [True, False, False]
    # Older than every retention: the global 3h takes the ended run; the run that has not ended keeps its data.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE rollouts SET finished_at = finished_at - ?", (2 * HOUR,))
    assert main(["purge", "--config", str(config), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"run {glob} (retention 3h, global): purged 1 rollouts, 2 calls" in out
    assert (
        f"run {live} (retention 3h, global): purged 0 rollouts, 0 calls; kept 1 older rollouts: the run has not ended"
        in out
    )
    assert [_purged(url, r) for r in (r_own, r_glob, r_live)] == [True, True, False]
    # An operator who knows the run is over says so.
    assert main(["purge", "--config", str(config), "--run", live, "--end-run"]) == 0
    assert "--end-run would first mark these runs ended" in capsys.readouterr().out
    assert not _purged(url, r_live)
    assert main(["purge", "--config", str(config), "--run", live, "--end-run", "--yes"]) == 0
    assert f"run {live} (retention 3h, global): purged 1 rollouts" in capsys.readouterr().out
    assert _purged(url, r_live)


def test_mistakes_are_explained(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        store.create_run("r", {}, run_id="r1")
    for args, message in (
        (["--db", url], "no retention applies"),
        (["--db", url, "--older-than", "30 days"], "not a duration"),
        (["--db", url, "--older-than", "1d", "--run", "nope"], "no such run in the store: nope"),
        (["--db", url, "--older-than", "1d", "--end-run"], "--end-run needs --run"),
        ([], "no store"),
    ):
        with pytest.raises(SystemExit, match=message):
            main(["purge", *args])


def test_the_installed_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    open_store(url).close()
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "purge", "--db", url, "--older-than", "30d"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "dry run: would purge 0 rollouts, 0 calls, 0 B" in out
