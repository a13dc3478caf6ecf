"""``harnessrl eval`` on the CPU demo as the README runs it: the base SmolLM2 and a checkpoint trained for one
step, each in the example's two harnesses (the demo's tool-calling agent over chat completions, a
retrieve-then-ask agent over the Anthropic Messages API), k attempts on held-out tasks: a 2 x 2 x k matrix
with pass@1, pass@k, intervals and paired differences, on the dashboard too; the same command again runs
nothing (issue 52). About 4 minutes on 2 cores."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harnessrl.cli import main
from harnessrl.store import open_store
from harnessrl.ui import dashboard_app
from harnessrl.weights.checkpoints import latest_checkpoint

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "examples" / "demo" / "config.toml"
EXAMPLE = ROOT / "examples" / "eval" / "config.toml"


@pytest.mark.slow
def test_base_and_a_trained_checkpoint_in_two_harnesses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trained = tmp_path / "demo"
    config = tmp_path / "eval.toml"  # the example with a smaller matrix: 6 tasks x 2 attempts
    config.write_text(EXAMPLE.read_text().replace("attempts = 4", "attempts = 2").replace("tasks = 20", "tasks = 6")
                      .replace('"../../runs/demo"', f'"{trained}"').replace('"../', f'"{EXAMPLE.parent}/../')
                      .replace('"rag_agent.py"', f'"{EXAMPLE.parent}/rag_agent.py"'))
    demo = tmp_path / "demo.toml"  # one step of the demo that always trains (no holding for a first 1.0)
    d = str(DEMO.parent)
    demo.write_text(DEMO.read_text().replace("explore_hold = true", "explore_hold = false")
                    .replace("tasks_per_step = 6", "tasks_per_step = 3").replace("eval_tasks = 40", "eval_tasks = 2")
                    .replace('"train.jsonl"', f'"{d}/train.jsonl"').replace('"eval.jsonl"', f'"{d}/eval.jsonl"')
                    .replace('"agent.py"', f'"{d}/agent.py"').replace('"verify.py"', f'"{d}/verify.py"'))
    assert main(["train", str(demo), "--run-dir", str(trained), "--steps", "1"]) == 0
    step = latest_checkpoint(trained)
    assert step is not None
    report = tmp_path / "report.md"
    assert main(["eval", str(config), "--run-dir", str(tmp_path / "eval"), "--out", str(report)]) == 0
    printed = capsys.readouterr().out
    for cell in ("base", f"demo/{step.name}"):
        for harness in ("search-agent", "rag-agent"):
            assert f"| {cell} | {harness} | " in report.read_text()
    assert printed.count(": pass@1 ") == 4  # four paired comparisons: 2 checkpoint pairs, 2 harness pairs
    assert "pass@2" in printed
    store = open_store(f"sqlite:///{tmp_path / 'eval' / 'store.db'}")
    try:
        rollouts = store.list_rollouts(limit=1000)
        assert len(rollouts) >= 2 * 2 * 6 * 2
        scored = [r for r in rollouts if r.failure_kind is None]
        assert all(store.get_calls(r.id) for r in scored)  # both harnesses' calls recorded
        versions = {r.metadata["eval"]["checkpoint"]: {c.policy_version for c in store.get_calls(r.id)}
                    for r in scored}
        assert versions["base"] == {0} and versions[f"demo/{step.name}"] == {1}
        run_id = rollouts[0].run_id
        with TestClient(dashboard_app(store, tokenizer="none")) as client:
            page = client.get(f"/evals/{run_id}").text
            assert page.count('class="attempt"') == len(rollouts) and "rag-agent" in page
    finally:
        store.close()
    assert main(["eval", str(config), "--run-dir", str(tmp_path / "eval")]) == 0
    assert "nothing was run" in capsys.readouterr().out
