"""The figures a run page opens with, each from where it is recorded (nothing estimated).

- status: the store (``Run.ended_at``; attempts queued or running) and ``events.jsonl`` (``step_failed``);
- step N of M: the last ``step`` (or ``sft_step``) event; M from the run's config in the store;
- held-out reward before -> after and every evaluation: the ``eval`` events;
- time per step split into rollouts / training / publishing: each ``step`` event's ``seconds``, as the
  controller measured them (``Controller.train_step``);
- attempts and rollouts trained: ``metrics.jsonl`` (``count/dynamic.attempts``, ``count/rollouts.trained``);
  failed and infra: the ``step`` events' counts (what the step line printed); held-out infra failures: the
  ``eval`` events;
- cost (calls, tokens, seconds, peak memory, per successful training attempt): the ``cost`` records of the
  ``step``/``sft_step`` and ``eval`` events, summed as the run's end sums them (``harnessrl/run_cost.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessrl.run_cost import FIELDS, Cost, RunCost, run_cost
from harnessrl.types import Run
from harnessrl.ui.runfiles import RunFiles

#: How the controller names a step's phases (``seconds`` of a ``step`` event), and what the page calls them.
PHASES = {"rollouts": "rollouts", "train": "training", "publish": "publishing"}


@dataclass(frozen=True)
class Status:
    kind: str  # "ended" | "failed" | "in progress"
    text: str


@dataclass(frozen=True)
class Evaluation:
    policy_version: int
    mean_reward: float | None  # None: nothing scored (every held-out attempt failed as infra)
    tasks: int
    infra_failures: int


@dataclass(frozen=True)
class Phase:
    key: str
    label: str
    mean_s: float  # over the steps that recorded it
    share: float  # of the mean step's total, 0..1


@dataclass(frozen=True)
class Outcomes:
    """What the steps did with their attempts. ``step`` events count the rollouts of the groups a step
    handed to training, ``metrics.jsonl`` how many attempts it ran (dynamic sampling runs more) and how
    many rollouts it trained (a held step or a zero-variance group trains none)."""

    attempts: int | None  # sum of count/dynamic.attempts; None when no step recorded it
    rollouts: int  # the steps' rollouts (after async mode drops stale groups)
    trained: int | None  # sum of count/rollouts.trained
    failed: int  # of the steps' rollouts, not succeeded (agent or infra)
    infra: int  # the steps' attempts that failed for an infra reason (never a reward)
    stale_dropped: int
    eval_infra: int  # held-out attempts that failed for an infra reason

    @property
    def shown(self) -> int:
        return self.attempts if self.attempts is not None else self.rollouts


@dataclass
class Headline:
    status: Status
    steps_done: int
    steps_planned: int | None
    policy_version: int | None  # after the last step (its event)
    in_flight: int  # attempts queued or running in the store now
    in_flight_capped: bool  # more than counted
    evaluations: list[Evaluation] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    step_mean_s: float | None = None
    steps_timed: int = 0
    outcomes: Outcomes | None = None
    cost: RunCost | None = None

    @property
    def before(self) -> Evaluation | None:
        return self.evaluations[0] if len(self.evaluations) > 1 else None

    @property
    def after(self) -> Evaluation | None:
        return self.evaluations[-1] if self.evaluations else None


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else 0


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def planned_steps(run: Run, files: RunFiles) -> int | None:
    """M: ``[sft] steps`` for ``harnessrl sft`` runs (they write ``sft_step`` events), else ``[run] steps``."""
    config = run.config if isinstance(run.config, dict) else {}
    section = "sft" if files.sft_steps else "run"
    steps = (config.get(section) or {}).get("steps")
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def run_status(run: Run, files: RunFiles, in_flight: int, now: float | None = None) -> Status:
    """Ended (the store says so); failed (a ``step_failed`` event after the last step); else in progress,
    with what is known of it: attempts in flight, or the age of the last event (a stopped process and
    one that is training look the same from the record)."""
    if run.ended_at is not None:
        return Status("ended", "ended " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.ended_at)))
    failed = files.failures[-1] if files.failures else None
    last_step = max((_int(e.get("step")) for e in files.steps + files.sft_steps), default=0)
    if failed is not None and _int(failed.get("step")) > last_step:
        return Status("failed", f"stopped: step {_int(failed.get('step'))} failed: {failed.get('reason', '')}")
    if in_flight:
        return Status("in progress", "attempts in flight")
    last = max((t for e in files.events if (t := _finite(e.get("time"))) is not None), default=None)
    if last is None:
        return Status("in progress", "nothing recorded yet")
    ago = max(0.0, (now if now is not None else time.time()) - last)
    return Status("in progress", f"no attempt in flight; last event {_ago(ago)} ago")


def _ago(s: float) -> str:
    return (f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h" if s < 172800
            else f"{s / 86400:.0f} days")


def evaluations(files: RunFiles) -> list[Evaluation]:
    """Every held-out evaluation in the order it ran (events.jsonl; else metrics.jsonl's ``eval/`` rows)."""
    if files.evals:
        return [Evaluation(_int(e.get("policy_version")), _finite(e.get("mean_reward")), _int(e.get("tasks")),
                           _int(e.get("infra_failures"))) for e in files.evals]
    return [Evaluation(_int(row.get("step")), _finite(row.get("eval/reward_mean")), _int(row.get("eval/tasks")), 0)
            for row in files.metrics if "eval/reward_mean" in row]


def phases(steps: Sequence[dict[str, Any]]) -> tuple[list[Phase], float | None, int]:
    """Mean seconds per step of each phase the controller timed, their shares, the mean step and how
    many steps had times. Phases in the controller's order; any other key it records follows."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    timed = 0
    for e in steps:
        seconds = e.get("seconds")
        if not isinstance(seconds, dict):
            continue
        timed += 1
        for k, v in seconds.items():
            if (x := _finite(v)) is not None:
                sums[k] = sums.get(k, 0.0) + x
                counts[k] = counts.get(k, 0) + 1
    if not timed:
        return [], None, 0
    keys = [k for k in PHASES if k in sums] + [k for k in sums if k not in PHASES]
    means = {k: sums[k] / counts[k] for k in keys}
    total = sum(means.values())
    out = [Phase(k, PHASES.get(k, k), means[k], means[k] / total if total > 0 else 0.0) for k in keys]
    return out, total, timed


def step_times(steps: Sequence[dict[str, Any]]) -> list[tuple[int, list[tuple[str, float]]]]:
    """Each timed step's ``(phase, seconds)`` in the controller's phase order (for the per-step bars)."""
    out = []
    for e in steps:
        seconds = e.get("seconds")
        if isinstance(seconds, dict):
            known = [k for k in PHASES if k in seconds] + [k for k in seconds if k not in PHASES]
            out.append((_int(e.get("step")), [(k, x) for k in known if (x := _finite(seconds[k])) is not None]))
    return out


def _metric_sum(rows: Sequence[dict[str, Any]], name: str) -> int | None:
    values = [_int(r[name]) for r in rows if name in r]
    return sum(values) if values else None


def outcomes(files: RunFiles) -> Outcomes | None:
    if not files.steps and not files.evals:
        return None
    return Outcomes(
        attempts=_metric_sum(files.metrics, "count/dynamic.attempts"),
        rollouts=sum(_int(e.get("rollouts")) for e in files.steps),
        trained=_metric_sum(files.metrics, "count/rollouts.trained"),
        failed=sum(_int(e.get("failed")) for e in files.steps),
        infra=sum(_int(e.get("infra")) for e in files.steps),
        stale_dropped=sum(_int(e.get("stale_dropped")) for e in files.steps),
        eval_infra=sum(_int(e.get("infra_failures")) for e in files.evals))


def headline(run: Run, files: RunFiles, in_flight: int = 0, *, in_flight_capped: bool = False,
             now: float | None = None) -> Headline:
    done_events = [_int(e.get("step")) for e in files.steps + files.sft_steps]
    done = max(done_events, default=0) or max((_int(r.get("step")) for r in files.metrics
                                               if "eval/reward_mean" not in r), default=0)
    ph, mean_s, timed = phases(files.steps)
    last = (files.steps + files.sft_steps)[-1:]
    version = _int(last[0].get("policy_version")) if last and "policy_version" in last[0] else None
    return Headline(status=run_status(run, files, in_flight, now), steps_done=done,
                    steps_planned=planned_steps(run, files), policy_version=version, in_flight=in_flight, in_flight_capped=in_flight_capped,
                    evaluations=evaluations(files), phases=ph, step_mean_s=mean_s, steps_timed=timed,
                    outcomes=outcomes(files), cost=run_cost(files.events))


#: Figures that are not divided by the successes (a count of them, a peak).
_NOT_PER_SUCCESS = ("successes", "peak_rss_bytes")


@dataclass(frozen=True)
class CostRow:
    """One figure of the run page's cost table: training steps, held-out evaluations, both, and the training
    figure per successful training attempt (None where it does not divide)."""

    name: str
    meaning: str
    train: float | None
    held_out: float | None
    total: float | None
    per_success: float | None


def cost_rows(cost: RunCost) -> list[CostRow]:
    rows = []
    for name, meaning in FIELDS.items():
        train = getattr(cost.train, name)
        per = (train / cost.train.successes if cost.train.successes and train is not None
               and name not in _NOT_PER_SUCCESS else None)
        rows.append(CostRow(name, meaning, train, getattr(cost.held_out, name), getattr(cost.total, name), per))
    return rows


def step_costs(files: RunFiles) -> list[tuple[int, Cost]]:
    """Each step's own cost record, in the order recorded (steps written before costs were recorded: none)."""
    return [(_int(e.get("step")), Cost.from_record(e["cost"])) for e in files.steps + files.sft_steps
            if isinstance(e.get("cost"), dict)]
