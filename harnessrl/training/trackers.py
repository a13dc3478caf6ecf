"""Experiment trackers that mirror the step metrics: TensorBoard, Weights & Biases, MLflow.

``<run_dir>/metrics.jsonl`` stays the source of truth (the dashboard reads it); a tracker is a copy for
people who already watch their runs there. Each one is opened at trainer start, so a missing package or a
bad login fails before any rollout runs. Each tool's own environment variables keep working (WANDB_MODE,
WANDB_API_KEY, WANDB_DIR, MLFLOW_TRACKING_URI, ...); config values only fill in what they leave unset.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, get_args

from harnessrl.training.config import TrackerName, TrainingConfig

KNOWN: tuple[str, ...] = get_args(TrackerName)


class TrackerError(RuntimeError):
    """A tracker named in ``training.trackers`` cannot be used (unknown name or package not installed)."""


class Tracker(Protocol):
    name: str

    def log(self, step: int, values: Mapping[str, float]) -> None: ...

    def close(self, failed: bool = False) -> None:
        """End the tracker's run; ``failed`` when training stopped on an error (or Ctrl-C)."""


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics row (bools, strings, NaN and inf are not tracked)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}


def open_trackers(config: TrainingConfig, run_dir: Path, run_name: str) -> list[Tracker]:
    """Start every tracker of ``config.trackers``; the training config is logged once as hyper-parameters."""
    run_dir.mkdir(parents=True, exist_ok=True)
    opened: list[Tracker] = []
    try:
        for name in dict.fromkeys(config.trackers):
            if name == "tensorboard":
                opened.append(TensorBoardTracker(run_dir))
            elif name == "wandb":
                opened.append(WandbTracker(config, run_dir, run_name))
            elif name == "mlflow":
                opened.append(MlflowTracker(config, run_dir, run_name))
            else:
                raise TrackerError(f"unknown tracker {name!r} in training.trackers; choose from {list(KNOWN)}")
    except BaseException:
        for tracker in opened:
            tracker.close()
        raise
    return opened


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError as exc:
        raise TrackerError(f"training.trackers includes {module!r} but the {module} package is not "
                           f"installed: pip install 'harnessrl[tracking]'") from exc


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(run_dir / "tb"))

    def log(self, step: int, values: Mapping[str, float]) -> None:
        for key, value in values.items():
            self._writer.add_scalar(key, value, step)
        self._writer.flush()

    def close(self, failed: bool = False) -> None:
        self._writer.close()


class WandbTracker:
    """One W&B run per harnessrl run (its id is the run id, so a resumed run continues the same W&B run).

    Steps go in a ``step`` column rather than W&B's own step, which must only grow: an evaluation logged
    at a policy version, or a step redone after a kill, would otherwise be dropped."""

    name = "wandb"

    def __init__(self, config: TrainingConfig, run_dir: Path, run_name: str) -> None:
        wandb = _require("wandb")
        self._run = wandb.init(
            project=config.tracker_project or os.environ.get("WANDB_PROJECT") or "harnessrl",
            name=run_name,
            id=re.sub(r"[/\\#?%:]", "-", run_name),  # characters W&B refuses in run ids
            resume="allow",
            dir=os.environ.get("WANDB_DIR") or str(run_dir),
            config=config.model_dump(mode="json"),
            allow_val_change=True,
            reinit="create_new",  # a second trainer in the process gets its own run, not the first one's
        )
        self._run.define_metric("step")
        self._run.define_metric("*", step_metric="step")

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self._run.log({**values, "step": step})

    def close(self, failed: bool = False) -> None:
        self._run.finish(exit_code=1 if failed else 0)


class MlflowTracker:
    """One MLflow run per harnessrl run, found again by its ``harnessrl.run_id`` tag on resume.

    Without MLFLOW_TRACKING_URI the store is ``<run_dir>/mlflow.db`` (MLflow 3 refuses its old ``mlruns``
    folder store unless MLFLOW_ALLOW_FILE_STORE=true), so nothing lands in the current directory."""

    name = "mlflow"

    def __init__(self, config: TrainingConfig, run_dir: Path, run_name: str) -> None:
        _require("mlflow")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        local = not os.environ.get("MLFLOW_TRACKING_URI")
        uri = f"sqlite:///{run_dir.resolve() / 'mlflow.db'}" if local else None
        self._client = client = MlflowClient(tracking_uri=uri)
        experiment = config.tracker_project or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "harnessrl"
        found = client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found is not None else client.create_experiment(
            experiment, artifact_location=(run_dir.resolve() / "mlartifacts").as_uri() if local else None)
        key = re.sub(r"[^\w.-]", "_", run_name)  # MLflow's filter syntax cannot escape quotes
        runs = client.search_runs([exp_id], f"tags.`harnessrl.run_id` = '{key}'", max_results=1)
        run = runs[0] if runs else client.create_run(exp_id, run_name=run_name, tags={"harnessrl.run_id": key})
        self._run_id = run.info.run_id
        if runs:
            client.update_run(self._run_id, status="RUNNING")
        # params cannot change once logged: a resumed run adds only the keys it did not have
        params = {k: v for k, v in _flatten(config.model_dump(mode="json")).items() if k not in run.data.params}
        client.log_batch(self._run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def log(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        ms = int(time.time() * 1000)
        self._client.log_batch(self._run_id, metrics=[
            Metric(re.sub(r"[^\w\-. :/]", "_", k), v, ms, step) for k, v in values.items()])

    def close(self, failed: bool = False) -> None:
        self._client.set_terminated(self._run_id, status="FAILED" if failed else "FINISHED")


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
