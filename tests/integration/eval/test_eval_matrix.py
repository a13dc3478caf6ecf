"""``harnessrl eval`` through the whole stack (tiny engine, gateway, controller, local runner, verifier): two
harnesses x k attempts, infra failures rerun up to the bound and never scored, a task with only infra attempts
unscored, the paired comparison, a report with its plot, and a rerun that runs nothing (issue 52).
About 40 s on 2 cores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from run_config import TINY_ENGINE, write_run_config
from starlette.testclient import TestClient

from harnessrl.cli import main
from harnessrl.config import load_config
from harnessrl.drivers.eval import evaluate
from harnessrl.store import open_store
from harnessrl.types import FailureKind
from harnessrl.ui import dashboard_app

HERE = Path(__file__).resolve().parent
KINDS = ("solved-1", "solved-2", "unsolved", "flaky", "broken")


def _config(tmp_path: Path, tasks: tuple[str, ...] = KINDS, sleep: float = 0.0) -> Path:
    (tmp_path / "state").mkdir(exist_ok=True)
    with (tmp_path / "tasks.jsonl").open("w") as f:
        for t in tasks:
            f.write(json.dumps({"id": t, "input": {"question": t},
                                "verifier_input": {"kind": t.split("-")[0]}}) + "\n")
    agent = [sys.executable, str(HERE / "agent.py")]
    return write_run_config(tmp_path, {
        "run": {"name": "eval-test", "dir": str(tmp_path / "eval")},
        "tasks": {"eval": str(tmp_path / "tasks.jsonl")},
        "engine": dict(TINY_ENGINE),
        "eval": {"attempts": 2, "infra_retries": 1, "temperature": 1.0, "resamples": 500},
        "harnesses": {"right": {"command": agent, "env": {"EVAL_ANSWER": "right", "EVAL_AGENT_SLEEP": str(sleep)}},
                      "wrong": {"command": agent, "env": {"EVAL_ANSWER": "wrong", "EVAL_AGENT_SLEEP": str(sleep)}}},
        "runner": {"timeout_s": 120, "concurrency": 8, "sandbox": "none"},
        "rewards": {"verifier": [sys.executable, str(HERE / "verify.py"), str(tmp_path / "state")]},
    })


def test_a_two_harness_matrix_reruns_infra_within_its_bound_and_a_rerun_runs_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    out = tmp_path / "report" / "report.md"
    assert main(["eval", str(cfg), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    config = load_config(cfg)
    store = open_store(config.store_url)
    try:
        rollouts = store.list_rollouts(limit=1000)
        by_cell: dict[tuple[str, str], list] = {}
        for r in rollouts:
            by_cell.setdefault((r.metadata["eval"]["harness"], r.task_id), []).append(r)
        assert {r.metadata["eval"]["checkpoint"] for r in rollouts} == {"base"}
        assert all(len(store.get_calls(r.id)) == 1 for r in rollouts if r.failure_kind is None)
        for harness in ("right", "wrong"):
            for task in ("solved-1", "solved-2", "unsolved"):  # no infra: exactly k attempts
                assert len(by_cell[harness, task]) == 2
            broken = by_cell[harness, "broken"]  # k attempts and 1 rerun, all infra: then it stops
            assert len(broken) == 3 and all(r.failure_kind == FailureKind.INFRA for r in broken)
            flaky = by_cell[harness, "flaky"]  # its first verifier run fails as infra, is rerun and scores
            assert any(r.failure_kind == FailureKind.INFRA for r in flaky)
            assert any(r.failure_kind is None for r in flaky)
    finally:
        store.close()
    summary = evaluate(load_config(cfg))  # the same eval again: nothing is run
    assert summary.launched == 0
    right, wrong = summary.figures.cells
    assert (right.harness, wrong.harness) == ("right", "wrong")
    assert right.pass1.value == pytest.approx(0.75) and wrong.pass1.value == 0.0  # 3 of 4 scored tasks
    assert right.unscored_tasks == ["broken"] == wrong.unscored_tasks  # not a 0 in either
    assert right.passk.value == pytest.approx(0.75) and right.passk_tasks == 3 + (right.tasks["flaky"].n == 2)
    (cmp,) = summary.figures.comparisons
    assert cmp.tasks == 4 and cmp.difference.value == pytest.approx(-0.75) and cmp.difference.excludes_zero()
    assert "right better than" in cmp.verdict or cmp.verdict.startswith("base / right better")
    assert "base" in printed and "right" in printed and "pass@2" in printed and "unscored" in printed
    report = out.read_text()
    assert "| base | right | 4 (+1 unscored) | 0.750" in report and "![pass@1 and pass@2" in report
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    store = open_store(config.store_url)
    try:
        assert len(store.list_rollouts(limit=1000)) == len(rollouts)
        with TestClient(dashboard_app(store, tokenizer="none")) as client:  # the dashboard shows the same
            assert f'/evals/{summary.run_id}"' in client.get("/").text
            page = client.get(f"/evals/{summary.run_id}")
            assert page.status_code == 200
            html = page.text
            assert "4 (+1 unscored)" in html and str(right.pass1) in html and cmp.verdict in html
            grid = html[html.index('id="eval-grid"'):]
            assert grid.count('class="attempt"') == len(rollouts)  # every attempt, each a link to its rollout
            assert all(f"/rollouts/{r.id}" in grid for r in rollouts)
            assert client.get("/evals/nope").status_code == 404
    finally:
        store.close()


def test_a_changed_task_set_is_refused_with_what_changed(tmp_path: Path) -> None:
    cfg = _config(tmp_path, ("solved-1",))
    assert evaluate(load_config(cfg)).launched == 4  # 2 harnesses x 2 attempts
    _config(tmp_path, ("solved-1", "unsolved-2"))
    with pytest.raises(SystemExit, match="tasks added: unsolved-2"):
        main(["eval", str(cfg)])


def test_an_eval_killed_mid_way_resumes_with_its_unfinished_attempts_run_again(tmp_path: Path) -> None:
    """SIGKILL while attempts run: the next run closes them as infra, runs what is missing, and ends with
    every task of every cell at k scored attempts; what had finished is not run again."""
    import os
    import signal
    import subprocess
    import time

    cfg = _config(tmp_path, ("solved-1", "solved-2", "unsolved-1"), sleep=3.0)  # long enough to be killed in flight
    proc = subprocess.Popen([sys.executable, "-m", "harnessrl.cli", "eval", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    config = load_config(cfg)
    deadline = time.monotonic() + 120
    finished: list[str] = []
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        if not (tmp_path / "eval" / "store.db").exists():
            continue
        store = open_store(config.store_url)
        try:
            rollouts = store.list_rollouts(limit=1000)
        finally:
            store.close()
        finished = [r.id for r in rollouts if r.status.terminal]
        if finished and any(not r.status.terminal for r in rollouts):
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert finished, "no attempt finished before the kill"
    resumed_at = time.time()
    summary = evaluate(load_config(cfg))
    store = open_store(config.store_url)
    try:
        rollouts = store.list_rollouts(limit=1000)
    finally:
        store.close()
    interrupted = [r for r in rollouts if r.failure_kind == FailureKind.INFRA]
    assert interrupted and all("interrupted" in (r.error or "") for r in interrupted)
    first_run_scored = [r for r in rollouts if r.created_at < resumed_at and r.failure_kind != FailureKind.INFRA]
    assert summary.launched == 2 * 3 * 2 - len(first_run_scored)  # only what the killed run did not finish
    for cell in summary.figures.cells:
        assert all(r.n == 2 for r in cell.tasks.values()) and not cell.unscored_tasks
    assert set(finished) <= {r.id for r in rollouts}  # nothing finished was replaced
    assert sum(r.failure_kind != FailureKind.INFRA for r in rollouts) == 2 * 3 * 2
