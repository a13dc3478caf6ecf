"""An eval's attempts and figures read back from the store: what the command prints and the dashboard shows.

Each attempt is a rollout of the eval's run whose metadata ``eval`` names its cell (checkpoint and harness);
the cell and checkpoint order is the order attempts were first recorded (the order they were asked for).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harnessrl.evaluation.figures import Attempt, CellFigures, Comparison, cell_figures, comparisons
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import Store

#: The rollout metadata key that holds an attempt's cell.
TAG = "eval"

Cell = tuple[str, str, str]  # checkpoint, harness, task


def recorded_attempts(store: Store, run_id: str) -> dict[Cell, list[Attempt]]:
    """Every recorded attempt of the eval by (checkpoint, harness, task), oldest first."""
    rollouts = [r for r in store.list_rollouts(run_id=run_id, limit=1_000_000) if isinstance(r.metadata.get(TAG), dict)]
    stats = store.rollout_stats([r.id for r in rollouts])
    out: dict[Cell, list[Attempt]] = defaultdict(list)
    for r in rollouts:
        cell = r.metadata[TAG]
        s = stats.get(r.id)
        out[str(cell.get("checkpoint")), str(cell.get("harness")), r.task_id].append(
            Attempt(r, rollout_reward(s.rewards) if s is not None else None))
    return out


@dataclass(frozen=True)
class EvalFigures:
    """Every cell's figures and the paired comparisons, with the settings they were read with."""

    cells: list[CellFigures]
    comparisons: list[Comparison]
    task_ids: list[str]
    k: int
    attempts: int
    level: float
    success_at: float

    def cell(self, checkpoint: str, harness: str) -> CellFigures | None:
        return next((c for c in self.cells if c.checkpoint == checkpoint and c.harness == harness), None)


def eval_figures(store: Store, run_id: str, *, task_ids: Sequence[str], k: int, attempts: int,
                 success_at: float, checkpoints: Sequence[str] | None = None, harnesses: Sequence[str] | None = None,
                 resamples: int = 2000, level: float = 0.95) -> EvalFigures:
    """The figures of an eval; ``checkpoints``/``harnesses`` order the matrix (default: as recorded)."""
    done = recorded_attempts(store, run_id)
    checkpoints = list(checkpoints or dict.fromkeys(c for c, _, _ in done))
    harnesses = list(harnesses or dict.fromkeys(h for _, h, _ in done))
    cells = [cell_figures(ck, h, (a for t in task_ids for a in done.get((ck, h, t), [])), success_at=success_at,
                          k=k, task_ids=task_ids, resamples=resamples, level=level)
             for ck in checkpoints for h in harnesses]
    cells = [_with_usage(store, c) for c in cells]
    return EvalFigures(cells, comparisons(cells, resamples=resamples, level=level), list(task_ids), k, attempts,
                       level, success_at)


def _with_usage(store: Store, cell: CellFigures) -> CellFigures:
    """The cell with its recorded calls and tokens per attempt (infra attempts included: they were paid for)."""
    ids = [a.rollout.id for r in cell.tasks.values() for a in r.attempts]
    if not ids:
        return cell
    usage = store.call_usage(ids)
    return replace(cell, calls_per_attempt=usage.calls / len(ids),
                   tokens_per_attempt=(usage.prompt_tokens + usage.completion_tokens) / len(ids))


def figures_of_run(store: Store, run_id: str, config: Mapping[str, Any]) -> EvalFigures:
    """An eval run's figures as its recorded config asks (the dashboard: no config file at hand)."""
    ev = config.get("eval") or {}
    attempts = int(ev.get("attempts") or 4)
    min_reward = (config.get("sft") or {}).get("min_reward")
    return eval_figures(store, run_id, task_ids=[t.id for t in store.list_tasks(run_id)],
                        k=int(ev.get("k") or attempts), attempts=attempts,
                        success_at=1.0 if min_reward is None else float(min_reward),
                        resamples=int(ev.get("resamples") or 2000), level=float(ev.get("level") or 0.95))
