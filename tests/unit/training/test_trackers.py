"""Experiment trackers receive exactly what the trainer returned: real W&B (offline) and MLflow (SQLite)."""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.trackers import TrackerError, scalars
from harnessrl.training.train_batch import TrainBatch
from harnessrl.training.trainer import Trainer

from ._helpers import make_sample, tiny_llama

RUN_ID = "demo-0123abcd"


def _cfg(trackers: list[str]) -> TrainingConfig:
    return TrainingConfig(lr=5e-3, lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
                          micro_batch_tokens=40, device="cpu", trackers=trackers)


def _batch() -> TrainBatch:
    samples = [make_sample([3 + i, 5, 7, 11, 13, 17 + i, 19, 23], [0, 0, 0, 1, 1, 1, 1, 1], rollout_id=f"r{i}",
                           advantage=1.0 if i % 2 else -1.0) for i in range(4)]
    return TrainBatch(samples=samples, rewards={"r0": 0.0, "r1": 1.0, "r2": 0.0, "r3": 1.0},
                      counts={"fidelity.exact": 4})


def _train(trackers: list[str], run_dir: Path, steps: int, first_step: int = 0, run_id: str = RUN_ID,
           eval_step: int | None = None) -> list[dict]:
    """``steps`` real updates, then an evaluation at ``eval_step`` (the last step by default);
    ``first_step`` mimics a resume from that step's checkpoint."""
    trainer = Trainer(tiny_llama(), _cfg(trackers), run_dir=run_dir, run_id=run_id)
    trainer.step_count = first_step
    assert trainer.metrics is not None  # below: what the controller's evaluate writes, NaN included
    if first_step == 0:  # the untrained policy's held-out reward, logged at policy version 0
        trainer.metrics.write(0, {"eval/reward_mean": 0.25, "eval/tasks": 4})
    out = [trainer.step(_batch()) for _ in range(steps)]
    trainer.metrics.write(first_step + steps if eval_step is None else eval_step,
                          {"eval/reward_mean": 0.75, "eval/tasks": 4, "eval/nan": math.nan})
    trainer.close()
    return out


def test_mlflow_history_equals_the_trainer_metrics_and_resume_continues_the_run(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    run_dir = tmp_path / "run"
    run_id = "it's-0123abcd"  # a quote: MLflow's search filter cannot escape it
    steps = _train(["mlflow"], run_dir, 2, run_id=run_id) + _train(["mlflow"], run_dir, 1, first_step=2, run_id=run_id)

    assert not any((tmp_path / "cwd").iterdir())  # the default store is <run_dir>/mlflow.db, not the cwd
    client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("harnessrl")
    (run,) = client.search_runs([exp.experiment_id])  # the resumed trainer continued the same run
    assert run.info.run_name == run_id and run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.005" and run.data.params["lora.r"] == "4"
    assert run.data.params["lora.target_modules"] == "['q_proj', 'v_proj']"
    tracked = [scalars(m) for m in steps]
    assert "loss" in tracked[0] and len(tracked[0]) > 20
    for key in tracked[0]:
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert history == [(i + 1, t[key]) for i, t in enumerate(tracked)], key
    evals = client.get_metric_history(run.info.run_id, "eval/reward_mean")
    assert sorted((m.step, m.value) for m in evals) == [(0, 0.25), (2, 0.75), (3, 0.75)]
    assert "eval/nan" not in run.data.metrics


def _wandb_records(path: Path):
    """The records of a ``.wandb`` transaction log (LevelDB log format: 32 KiB blocks of CRC, length, type)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, part = 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        if kind == 0:
            break
        part += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last fragment of one
            record = pb.Record()
            record.ParseFromString(part)
            part = b""
            yield record


def test_wandb_offline_run_holds_every_step_and_a_failure_does_not_stop_training(tmp_path, monkeypatch, caplog):
    import wandb

    for var in ("WANDB_DIR", "WANDB_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    run_dir = tmp_path / "run"
    # the evaluation comes late, at an earlier step: W&B's own step only grows and would drop it
    steps = _train(["wandb", "tensorboard"], run_dir, 2, eval_step=1)
    wandb.teardown()  # run.finish() can return before the service process has flushed the run's log

    (log,) = run_dir.glob(f"wandb/offline-run-*-{RUN_ID}/run-{RUN_ID}.wandb")  # under the run dir by default
    rows, config = [], {}
    for record in _wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append({i.key or ".".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
        elif kind == "run":  # the run's start, with the config given to wandb.init
            assert record.run.project == "harnessrl" and record.run.display_name == RUN_ID
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
    assert config["lr"] == 0.005 and config["lora"]["r"] == 4 and config["trackers"] == ["wandb", "tensorboard"]
    tracked = [{**scalars(m), "step": i + 1} for i, m in enumerate(steps)]
    assert len(rows) == 4 and [{k: row[k] for k in t} for row, t in zip(rows[1:3], tracked, strict=True)] == tracked
    assert rows[0]["step"] == 0 and rows[0]["eval/reward_mean"] == 0.25
    assert rows[3]["step"] == 1 and rows[3]["eval/reward_mean"] == 0.75 and "eval/nan" not in rows[3]
    assert any((run_dir / "tb").iterdir())

    # A tracker that fails while logging (here: its run already finished) is warned about once; JSONL goes on.
    trainer = Trainer(tiny_llama(), _cfg(["wandb"]), run_dir=run_dir, run_id=RUN_ID + "x")
    assert trainer.metrics is not None
    trainer.metrics.trackers[0].close()
    with caplog.at_level(logging.DEBUG, logger="harnessrl.training.metrics"):
        trainer.step(_batch())
        trainer.step(_batch())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "wandb log failed" in r.message]
    assert len(warnings) == 1
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows[-2:]] == [1, 2]
    trainer.close()


def test_a_missing_tracker_package_fails_at_start_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    with pytest.raises(TrackerError, match=r"pip install 'harnessrl\[tracking\]'"):
        Trainer(tiny_llama(), _cfg(["tensorboard", "wandb"]), run_dir=tmp_path / "run", run_id=RUN_ID)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_an_unknown_tracker_is_refused_with_the_known_names():
    with pytest.raises(ValidationError, match="'tensorboard', 'wandb' or 'mlflow'"):
        _cfg(["neptune"])


def test_a_trainer_closed_after_a_failure_marks_the_mlflow_run_failed(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    run_dir = tmp_path / "run"
    trainer = Trainer(tiny_llama(), _cfg(["mlflow"]), run_dir=run_dir, run_id="crashed-run")
    trainer.step(_batch())
    trainer.close(failed=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("harnessrl").experiment_id])
    assert run.info.status == "FAILED"
