"""``harnessrl import`` then ``harnessrl sft`` on the tiny model: a real harness, gateway, engine and verifier.

The tiny random model never answers 'print' (held-out reward 0); SFT on imported conversations whose
reply is 'print' (reward 1.0; those with reward 0 are filtered out by min_reward) makes it answer so on
held-out questions it never saw: the reward goes 0 -> 1 through the unmodified harness. (The tiny model
needs ~20 steps at lr 5e-3 to say 'print' and stop; at 1e-2 or more it overshoots to 'pppppp'.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from run_config import TINY_ENGINE, write_run_config

from harnessrl.cli import main
from harnessrl.store import open_store
from harnessrl.weights.checkpoints import checkpoint_dir

HERE = Path(__file__).resolve().parent


@pytest.mark.slow  # ~45 s on 2 cores: model load, 3+3 held-out attempts, 20 tiny steps
def test_sft_on_imported_conversations_lifts_the_held_out_reward(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    chats = tmp_path / "chats.jsonl"
    with chats.open("w") as f:
        for i in range(8):
            good = i % 4 != 3
            f.write(json.dumps({"messages": [{"role": "user", "content": f"question number {i}"},
                                             {"role": "assistant", "content": "print" if good else "return 7"}],
                                "reward": 1.0 if good else 0.0, "task_id": f"t{i % 4}"}) + "\n")
    cfg = write_run_config(tmp_path, {
        "run": {"name": "sft", "dir": str(tmp_path / "run"), "eval_temperature": 0.0},
        "tasks": {"train": str(HERE / "train.jsonl"), "eval": str(HERE / "eval.jsonl")},
        "engine": TINY_ENGINE,
        "runner": {"command": [sys.executable, str(HERE / "agent.py")], "concurrency": 4, "timeout_s": 120},
        "rewards": {"verifier": [sys.executable, str(HERE / "verify.py")]},
        "training": {"lr": 5e-3, "lora": False, "trackers": []},
        "sft": {"runs": ["teacher"], "min_reward": 1.0, "steps": 20, "rollouts_per_step": 4},
    })
    assert main(["import", str(chats), "--into", str(cfg), "--run", "teacher"]) == 0
    assert "imported 8 rollouts" in capsys.readouterr().err
    assert main(["sft", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "held-out reward: 0.00 -> 1.00 (3 tasks)" in out, out
    run_dir = tmp_path / "run"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "sft_step"]
    assert [e["step"] for e in steps] == list(range(1, 21)) and all(e["rollouts"] == 4 for e in steps)
    assert checkpoint_dir(run_dir, 20).is_dir() and not checkpoint_dir(run_dir, 21).exists()
    # only reward-1.0 rollouts were trained: the rejected reply never was a target
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if "samples/count" in m]
    assert trained and all(m.get("samples/retokenized") == m["samples/count"] for m in trained)
    assert all(m["reward/mean"] == 1.0 for m in trained)
    store = open_store(f"sqlite:///{run_dir / 'store.db'}")
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert [v.version for v in store.list_policy_versions(run_id)] == list(range(1, 21))
    # its cost: the steps' trained tokens and the held-out attempts' calls, summed at the end and printed
    cost = [e for e in events if e["event"] == "cost"][-1]
    assert cost["train"]["tokens_trained"] == sum(m["tokens/trained"] for m in trained) > 0
    assert cost["train"]["attempts"] == 0 and cost["held_out"]["attempts"] == 6 and cost["held_out"]["calls"] > 0
    assert f"cost: {cost['total']['calls']:,} model calls (0 training, " in out
    assert "per successful training attempt: n/a (no training attempt recorded)" in out
