"""Production mode end to end on PostgreSQL: a small run of examples/production/simulate.py.

Real parts throughout: `harnessrl train` with `[run] source = "production"` as its own process (gateway in
production mode, embedded SmolLM2-135M, the off-policy loop), the unmodified demo agent as the app (one
subprocess per session, configured only by OPENAI_BASE_URL / OPENAI_API_KEY), the demo verifier judging
its answers, and simulated users posting delayed feedback over HTTP. Two phases on one store:

- learn: one off-policy update from rated sessions, offered as a canary candidate and decided by the rule;
- sabotage: the run restarted for one more update trained against the feedback (`invert_feedback`), at a
  high learning rate: a worse candidate, which the canary must roll back by itself.

What is asserted is what the mechanism guarantees, not that one honest update on a dozen sessions helps:
the honest v1 is decided by the rule either way (measured: promoted 0.208 vs 0.200 in one run, rolled back
0.000 vs 0.159 in another: one small off-policy update on SmolLM2 is as likely to hurt as to help), and the
inverted v2, trained at a high lr (a resumed run now takes its own lr; before, the checkpoint's optimizer
state restored the learn phase's), must be rolled back against whichever version is stable by then.

The users' signal here is `resolved` (the verifier's score of the served answer, so the canary's evidence
is the served reward itself): with thumbs' noise the few sessions a CI-sized run affords would not decide.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow



def simulate():
    spec = importlib.util.spec_from_file_location("production_simulate", ROOT / "examples/production/simulate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(2400)  # 12 min 47 s on 2 cores under a load average of 4-12 from parallel work
def test_canary_decides_each_candidate_and_rolls_back_a_worse_one(pg_url: str, tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    code = simulate().main([
        "--run-dir", str(tmp_path / "run"), "--db", pg_url, "--steps", "1", "--phases", "learn,sabotage",
        "--tasks", "8", "--signal", "resolved", "--silent", "0", "--late", "0", "--rate", "1.0",
        "--concurrency", "6", "--delay", "1", "3", "--seed", "0", "--sabotage-lr", "0.02", "--quiet",
        "--max-phase-s", "2000", "--out", str(out),
        "--set", "production.feedback.window_s=30",
        "--set", "production.training.min_sessions=12",
        "--set", "production.training.max_sessions=24",
        "--set", "production.canary.min_sessions=10",
        "--set", "production.canary.fraction=0.5",
        "--set", "training.lr=0.003",
        "--set", "gateway.pinned_sampling={temperature = 0.3}",
    ])
    assert code == 0
    result = json.loads(out.read_text())

    # An app key opens its own deployment only: not a training rollout's routes, the admin API, or another
    # deployment.
    scope = result["key_scope"]
    assert scope["/p/support/v1/models (its own)"] == 200, scope
    assert scope["/r/<rollout>/v1/chat/completions"] in (401, 403), scope
    assert scope["/r/<rollout>/reward"] in (401, 403), scope
    assert scope["/admin/deployments"] in (401, 403), scope
    assert scope["/p/simulation-other/v1/chat/completions"] == 403, scope

    learn, sabotage = result["phases"]
    assert learn["exit_code"] == 0 and sabotage["exit_code"] == 0, (learn["exit_code"], sabotage["exit_code"])
    decisions = result["decisions"]
    final = [(d["action"], d["candidate_version"]) for d in decisions if d["action"] != "hold"]
    # Every decision is recorded with its evidence: v1 started and decided, v2 started and rolled back.
    assert final[0] == ("start", 1) and final[1][0] in ("promote", "rollback") and final[1][1] == 1, final
    assert final[2:] == [("start", 2), ("rollback", 2)], final
    stable = 1 if final[1][0] == "promote" else 0  # what v2 had to beat
    for d in decisions:
        assert d["reason"] and isinstance(d["stats"], dict), d
    rollback = next(d for d in decisions if d["action"] == "rollback")
    assert "trails by" in rollback["reason"], rollback

    def served(records: list[dict], version: int) -> list[float]:
        return [r["correct"] for r in records if r["version"] == version and r["correct"] is not None]

    records = learn["records"] + sabotage["records"]
    v0, v1, v2 = served(records, 0), served(records, 1), served(records, 2)
    assert len(v0) >= 10 and len(v1) >= 10 and len(v2) >= 10, (len(v0), len(v1), len(v2))
    mean = {v: sum(xs) / len(xs) for v, xs in ((0, v0), (1, v1), (2, v2))}
    # The rolled-back v2 served worse answers than the version it tried to replace (the verifier's score of
    # what users actually got, over all of both versions' sessions, not only the canary's window).
    assert mean[2] < mean[stable], mean
