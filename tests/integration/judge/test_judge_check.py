"""``harnessrl judge-check`` on the example's labelled set, through the real CLI and a judge on loopback:
agreement figures are printed, and a judge that favours the first place is caught by the shuffles."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.fake_engine import EngineServer
from fakes.scripted_judge import ScriptedJudge
from run_config import write_run_config

from harnessrl.rewards.judge_agreement import ranks, spearman

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "judge"


def judge_check(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessrl.cli", "--log-level", "ERROR", "judge-check",
                           str(EXAMPLE / "config.toml"), "--url", url, *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_judge_check_prints_agreement_for_the_example_set(judge_server: EngineServer,
                                                          scripted: ScriptedJudge) -> None:
    out = judge_check(judge_server.url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "judge scripted-judge (group) on 60 labelled answers: 60 scored"
    # the scripted judge passes hedges ("X or Y") that people reject: 12 of 60 disagree
    assert lines[1] == "accuracy: 80.0%"
    assert lines[2] == "spearman: 0.761"
    assert lines[3].startswith("position bias over 2 shuffled orders: mean |score change| 0.000, best answer "
                               "changed in 0.0% of groups")
    assert len(scripted.requests) == 12 * 3  # 12 groups, each in its order and 2 shuffled ones


def test_position_bias_is_measured(judge_server: EngineServer, scripted: ScriptedJudge) -> None:
    scripted.position_bias = 0.6  # the first attempt of a group gets +0.6
    out = judge_check(judge_server.url, "--json", "--shuffles", "3")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["position_shift"] > 0.05 and report["top_changed"] > 0.3
    assert report["first_gain"] > 0.2 and report["last_gain"] <= 0


def test_judge_check_explains_a_missing_judge(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, {"run": {"name": "x"}})
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "judge-check", str(cfg)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "no [rewards.judge] section" in out.stderr


@pytest.mark.parametrize(("xs", "ys", "rho"), [([1, 2, 3], [10, 20, 30], 1.0), ([1, 2, 3], [3, 2, 1], -1.0),
                                                ([1, 1, 2, 2], [0, 0, 1, 1], 1.0), ([1, 2], [5, 5], None)])
def test_spearman(xs: list[float], ys: list[float], rho: float | None) -> None:
    assert spearman(xs, ys) == (pytest.approx(rho) if rho is not None else None)
    assert ranks([3.0, 1.0, 3.0]) == [2.5, 1.0, 2.5]
