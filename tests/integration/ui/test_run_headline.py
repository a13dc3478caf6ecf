"""The run page's headline in a real browser, figure by figure against the store and the run's files, and
its live refresh: the run moves on (a step, an evaluation, the end) and the open page follows without a
reload. Screenshots go to test-artifacts/ui/."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from harnessrl.store import Store
from harnessrl.types import FailureKind, RolloutStatus
from harnessrl.ui import dashboard_app
from harnessrl.ui.app import _fmt_s

from .browser import browser_page, needs_browser, serve, shot
from .fixture_data import Fixture, metrics_row


def _events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in rows if e["event"] == kind]


def _append(path: Path, *rows: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def _check_headline(page: Any, store: Store, fx: Fixture) -> None:
    run = store.get_run(fx.run_id)
    assert page.inner_text("#run-status") == ("ended" if run.ended_at is not None else "in progress")
    steps, evals = _events(fx.run_dir, "step"), _events(fx.run_dir, "eval")
    assert page.inner_text("#steps-done") == str(steps[-1]["step"])
    assert page.inner_text("#steps-planned") == str(run.config["run"]["steps"])
    assert page.inner_text("#held-out-before") == f"{evals[0]['mean_reward']:.2f}"
    assert page.inner_text("#held-out-after") == f"{evals[-1]['mean_reward']:.2f}"
    shown = page.locator("#evaluations .eval").evaluate_all("es => es.map(e => e.textContent)")
    assert shown == [f"v{e['policy_version']} {e['mean_reward']:.2f}" for e in evals]
    # the evaluations marked on the reward curve, at their policy versions
    marks = page.locator("#reward-chart .chart-mark").evaluate_all("ms => ms.map(m => Number(m.dataset.x))")
    assert marks == [e["policy_version"] for e in evals]
    # time per step: the mean of what the controller measured, phase by phase
    for phase in ("rollouts", "train", "publish"):
        mean = statistics.fmean(s["seconds"][phase] for s in steps)
        assert page.inner_text(f"#phases [data-phase={phase}] b") == _fmt_s(mean)
    assert page.inner_text("#step-time") == _fmt_s(statistics.fmean(sum(s["seconds"].values()) for s in steps))
    # the steps' attempts, failed and infra: the finished training rollouts in the store; trained: metrics.jsonl
    attempts = [r for r in store.iter_rollouts(run_id=fx.run_id) if r.step is not None
                and r.status not in (RolloutStatus.QUEUED, RolloutStatus.RUNNING)]
    assert page.inner_text("#rollouts") == str(len(attempts))
    failed = sum(r.status != RolloutStatus.SUCCEEDED for r in attempts)
    assert page.inner_text("#rollouts-failed") == f"{failed} failed"
    assert page.inner_text("#rollouts-infra") == f"{sum(r.failure_kind == FailureKind.INFRA for r in attempts)} infra"
    rows = [json.loads(line) for line in (fx.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert page.inner_text("#rollouts-trained") == f"{sum(r['count/rollouts.trained'] for r in rows)} trained"
    assert page.inner_text("#eval-infra") == f"{sum(e['infra_failures'] for e in evals)} held-out infra"
    in_flight = [r for s in (RolloutStatus.QUEUED, RolloutStatus.RUNNING)
                 for r in store.list_rollouts(run_id=fx.run_id, status=s)]
    assert page.locator("#in-flight").all_inner_texts() == ([str(len(in_flight))] if in_flight else [])


@needs_browser
def test_headline_figures_match_the_store_and_follow_the_run(store: Store, fx: Fixture, store_url: str) -> None:
    step3 = store.create_rollout(task_id="task-0", input={"q": "question 0"}, group_id="g3-0", api_key_hash="h",
                                 policy_version=2, run_id=fx.run_id, step=3)
    store.transition_rollout(step3.id, RolloutStatus.RUNNING)
    with serve(dashboard_app(store, store_url=store_url, tokenizer="none")) as url, browser_page() as page:
        page.goto(f"{url}/runs/{fx.run_id}")
        _check_headline(page, store, fx)
        assert page.inner_text("#in-flight") == "1"
        # the metric groups: labelled, the first open, rounding noise (advantage/mean ~1e-17) as 0
        groups = page.locator("details.metric-group")
        assert groups.evaluate_all("ds => ds.map(d => [d.id, d.open])") == [
            ["group-rewards", True], ["group-exploration", False], ["group-training", False],
            ["group-gateway", False], ["group-policy-coder", False]]
        assert page.locator("#group-exploration .chart-title", has_text="advantage/mean").text_content() == \
            "advantage/mean = 0"
        shot(page, "5-run-headline")

        # the run moves on while the page is open: step 3 trains, the last evaluation runs, the run ends
        page.click("#group-training > summary")
        page.evaluate("window.__kept = 1")
        store.add_reward(step3.id, 1.0, "final")
        store.transition_rollout(step3.id, RolloutStatus.SUCCEEDED, exit_code=0)
        _append(fx.run_dir / "metrics.jsonl", {**metrics_row(3), "count/dynamic.attempts": 1,
                                               "count/rollouts.trained": 1})
        _append(fx.run_dir / "events.jsonl",
                {"event": "step", "time": 1_700_000_040.0, "step": 3, "policy_version": 3, "rollouts": 1,
                 "failed": 0, "infra": 0, "reward_mean": 1.0, "stale_dropped": 0,
                 "seconds": {"rollouts": 12.0, "train": 1.5, "publish": 0.5}},
                {"event": "eval", "time": 1_700_000_050.0, "policy_version": 3, "mean_reward": 0.95, "tasks": 4,
                 "infra_failures": 0})
        store.end_run(fx.run_id)
        page.wait_for_selector("#run-status.run-ended", timeout=20_000)  # the page polls every 5 s
        assert page.evaluate("window.__kept") == 1  # refreshed in place, not reloaded
        _check_headline(page, store, fx)
        assert page.inner_text("#held-out-after") == "0.95"
        assert page.locator("#reward-chart circle").count() == 3 + 3  # train steps 1-3, evaluations v0 v2 v3
        assert page.evaluate("document.getElementById('group-training').open")  # what the reader opened stays
        assert page.get_attribute("#live", "data-live") == "0"  # ended: no more polling
        shot(page, "6-run-ended")
