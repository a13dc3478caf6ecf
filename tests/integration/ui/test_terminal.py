"""``harnessrl rollouts`` and ``harnessrl show`` print what the store holds, as tables."""

from __future__ import annotations

import re

import pytest

from harnessrl.cli import main
from harnessrl.store import Store
from harnessrl.types import RolloutStatus

from .fixture_data import XSS, Fixture


def test_rollouts_lists_and_filters(store: Store, fx: Fixture, store_url: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["rollouts", "--db", store_url, "--run", fx.run_id, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    ids = re.findall(r"│ ([0-9a-f]{32}) │", out)
    assert ids == [r.id for r in store.list_rollouts(run_id=fx.run_id, limit=3)]
    assert "--offset 3" in out  # more follow
    main(["rollouts", "--db", store_url, "--status", "failed"])
    out = capsys.readouterr().out
    failed = store.list_rollouts(status=RolloutStatus.FAILED)
    assert re.findall(r"│ ([0-9a-f]{32}) │", out) == [r.id for r in failed]
    assert "agent" in out
    main(["rollouts", "--db", store_url, "--task", "task-1", "--step", "2"])
    assert len(re.findall(r"│ ([0-9a-f]{32}) │", capsys.readouterr().out)) == 1
    with pytest.raises(SystemExit):
        main(["rollouts", "--db", store_url, "--limit", "3", "--offset", "2"])


def test_show_prints_rewards_calls_samples_and_logs(store: Store, fx: Fixture, store_url: str,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert main(["show", fx.rich, "--db", store_url]) == 0
    out = capsys.readouterr().out
    assert fx.rich in out and "succeeded" in out
    assert re.search(r"│ format\s+│ 0\.25\s+│ 1\s+│", out) and re.search(r"│ final\s+│ 0\.75\s+│", out)
    calls = re.findall(r"^│ (\d) │ chat\.completions", out, re.M)
    assert calls == [str(c.index) for c in store.get_calls(fx.rich)]
    assert "not trained: call error (engine said no)" in out
    assert re.search(r"refused and failed calls.*│ 3\s+│ error\s+│ chat\.completions\s+│\s+│ engine said no", out, re.S)
    assert "prefix broken at token 2 of 11" in out and "merged" in out
    assert XSS in out  # printed as plain text: rich markup in a log cannot restyle the terminal
    with pytest.raises(SystemExit, match="does not exist"):
        main(["show", "nope", "--db", store_url])


def test_db_takes_a_database_file_or_a_run_directory(store: Store, fx: Fixture, tmp_path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """What `harnessrl train` prints is a run directory; its store.db, or the directory itself, opens too."""
    run_dir = tmp_path / "a-run"
    run_dir.mkdir()
    (run_dir / "store.db").symlink_to(tmp_path / "ui.db")
    expected = [r.id for r in store.list_rollouts(run_id=fx.run_id, limit=3)]
    for db in (str(tmp_path / "ui.db"), str(run_dir)):
        assert main(["rollouts", "--db", db, "--run", fx.run_id, "--limit", "3"]) == 0
        assert re.findall(r"│ ([0-9a-f]{32}) │", capsys.readouterr().out) == expected
    with pytest.raises(SystemExit, match="without a store.db"):
        main(["rollouts", "--db", str(tmp_path)])
    with pytest.raises(SystemExit, match="no such file"):
        main(["rollouts", "--db", str(tmp_path / "missing.db")])
