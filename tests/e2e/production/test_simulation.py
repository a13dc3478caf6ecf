"""Production mode end to end on PostgreSQL: a small run of examples/production/simulate.py.

Real parts throughout: `harnessrl train` with `[run] source = "production"` as its own process (gateway in
production mode, embedded SmolLM2-135M, the off-policy loop), the unmodified demo agent as the app (one
subprocess per session, configured only by OPENAI_BASE_URL / OPENAI_API_KEY), the demo verifier judging
its answers, and simulated users posting delayed feedback over HTTP. Two phases on one store:

- learn: two off-policy updates from rated sessions at the example's settings (lr 5e-4, two AdamW steps an
  update), each offered as a canary candidate and decided by the rule before the next;
- sabotage: the run restarted for one more update trained against the feedback (`invert_feedback`), at a
  high learning rate: a worse candidate, which the canary must roll back by itself.

Asserted: the app key's scope; every candidate decided by the rule and recorded; served reward rising
(the version serving at the end of the learn phase was promoted and served better answers than v0); the
inverted candidate rolled back against whichever version is stable by then and serving worse.

The users' signal here is `resolved` (the verifier's score of the served answer, delayed, so the canary's
evidence is the served reward itself): with thumbs' noise the few sessions a CI-sized run affords would not
decide (docs/production.md). The full simulation (160 questions, 5 updates) took served reward from 0.15 to
0.24-0.25 with this signal and these settings.
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


@pytest.mark.timeout(3600)
def test_served_reward_rises_and_a_worse_candidate_is_rolled_back(pg_url: str, tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    code = simulate().main([
        "--run-dir", str(tmp_path / "run"), "--db", pg_url, "--steps", "2", "--phases", "learn,sabotage",
        "--tasks", "8", "--signal", "resolved", "--silent", "0", "--late", "0", "--rate", "1.0",
        "--concurrency", "6", "--delay", "1", "3", "--seed", "0", "--sabotage-lr", "0.02", "--quiet",
        "--max-phase-s", "2000", "--out", str(out),
        "--set", "production.feedback.window_s=30",
        "--set", "production.training.min_sessions=32",
        "--set", "production.training.max_sessions=32",
        "--set", "production.canary.min_sessions=10",
        "--set", "production.canary.fraction=0.5",
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
    # Every decision is recorded with its evidence: v1 and v2 started and decided in turn, v3 (inverted)
    # started and rolled back.
    assert [f for f in final if f[0] == "start"] == [("start", 1), ("start", 2), ("start", 3)], final
    verdicts = {v: a for a, v in final if a != "start"}
    assert verdicts.get(1) in ("promote", "rollback") and verdicts.get(2) in ("promote", "rollback"), final
    assert verdicts.get(3) == "rollback", final
    for d in decisions:
        assert d["reason"] and isinstance(d["stats"], dict), d
    rollback = next(d for d in decisions if d["action"] == "rollback" and d["candidate_version"] == 3)
    assert "trails by" in rollback["reason"], rollback

    def served(records: list[dict], version: int) -> list[float]:
        return [r["correct"] for r in records if r["version"] == version and r["correct"] is not None]

    records = learn["records"] + sabotage["records"]
    answers = {v: served(records, v) for v in range(4)}
    assert all(len(xs) >= 10 for xs in answers.values()), {v: len(xs) for v, xs in answers.items()}
    mean = {v: sum(xs) / len(xs) for v, xs in answers.items()}
    # Served reward rose: the version serving when the learn phase ended was promoted from training on the
    # users' delayed feedback, and the answers it served score higher than v0's.
    stable = max([v for v in (1, 2) if verdicts[v] == "promote"], default=0)
    assert stable > 0, (final, mean)
    assert mean[stable] > mean[0], mean
    # The rolled-back v3 served worse answers than the version it tried to replace.
    assert mean[3] < mean[stable], mean
