"""The run page's cost: the headline figure and the table read the cost records of ``events.jsonl`` and sum
them as the run's end does (``harnessrl/run_cost.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from starlette.testclient import TestClient

from harnessrl.run_cost import FIELDS, Cost, run_cost
from harnessrl.store import open_store
from harnessrl.ui import dashboard_app

STEP = Cost(attempts=8, successes=2, calls=16, prompt_tokens=12_345, completion_tokens=160, tokens_trained=120,
            engine_busy_s=4.0, call_s=30.0, trainer_s=5.0, harness_s=40.0, publish_s=0.25, cpu_s=20.0,
            children_cpu_s=6.0, peak_rss_bytes=3 * 2**29)
EVAL = Cost(attempts=3, successes=1, calls=6, prompt_tokens=600, completion_tokens=30, call_s=3.0, harness_s=6.0,
            peak_rss_bytes=2**30)


def _page(tmp_path: Path, events: list[dict]) -> str:
    store = open_store(f"sqlite:///{tmp_path}/store.db")
    run = store.create_run("demo", {"run": {"steps": 2}}, run_id="demo-1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"run_id": run.id}))
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    with TestClient(dashboard_app(store, run_dirs=[run_dir], tokenizer="none")) as client:
        html = client.get(f"/runs/{run.id}").text
    store.close()
    return html


def _text(html: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*>(.*?)</span>', html, re.S)
    assert m, element_id
    return re.sub(r"<[^>]+>", "", m.group(1))


def test_the_cost_figure_and_table_sum_the_records(tmp_path: Path) -> None:
    events = [{"event": "eval", "time": 1.0, "policy_version": 0, "mean_reward": 0.1, "tasks": 3, "infra_failures": 0,
               "cost": EVAL.record()}]
    events += [{"event": "step", "time": 2.0 + s, "step": s, "policy_version": s, "rollouts": 8, "failed": 0,
                "infra": 0, "reward_mean": 0.5, "seconds": {"rollouts": 10.0, "train": 5.0, "publish": 0.25},
                "cost": {**STEP.record(), "success_at": 1.0}} for s in (1, 2)]
    html = _page(tmp_path, events)
    cost = run_cost(events)
    assert cost is not None
    assert _text(html, "cost-calls") == "38"  # 16 + 16 training, 6 held-out
    assert _text(html, "cost-tokens") == "25,290 prompt + 350 completion tokens"
    assert _text(html, "cost-trained") == "240 trained"
    assert _text(html, "cost-peak") == "peak RSS 1.50 GiB"
    assert _text(html, "cost-per-success") == "8.0 calls per success"  # 32 training calls, 4 successes
    assert "success: reward &ge; 1, 4 of 16 training attempts" in html
    rows = dict(re.findall(r'<tr data-figure="([^"]+)"><td[^>]*>[^<]*</td>(.*?)</tr>', html, re.S))
    assert list(rows) == list(FIELDS)
    cells = {k: re.findall(r'<td class="num">([^<]*)</td>', v) for k, v in rows.items()}
    assert cells["calls"] == ["32", "6", "38", "8.0"]
    assert cells["prompt_tokens"] == ["24,690", "600", "25,290", "6,172.5"]
    assert cells["publish_s"] == ["500 ms", "0 ms", "500 ms", "125 ms"]
    assert cells["engine_busy_s"] == ["8.0 s", "n/a", "8.0 s", "2.0 s"]  # held-out records had none
    assert cells["peak_rss_bytes"] == ["1.50 GiB", "1.00 GiB", "1.50 GiB", ""]  # a peak is not divided
    assert cells["successes"][3] == ""
    steps = re.findall(r'<tr data-step="(\d+)"><td>\d+</td>(.*?)</tr>', html, re.S)
    assert [s for s, _ in steps] == ["1", "2"]
    assert re.findall(r'<td class="num">([^<]*)</td>', steps[0][1])[:3] == ["8", "2", "16"]


def test_a_run_without_cost_records_shows_none(tmp_path: Path) -> None:
    html = _page(tmp_path, [{"event": "step", "time": 2.0, "step": 1, "policy_version": 1, "rollouts": 8,
                             "failed": 0, "infra": 0, "reward_mean": 0.5}])
    assert 'id="run-cost"' not in html and 'id="cost-details"' not in html
