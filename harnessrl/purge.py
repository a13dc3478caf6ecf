"""Retention applied to a store: which runs a purge reaches and with which age (``targets``), the purge
(``purge``) and its report. ``harnessrl purge`` (``harnessrl/entrypoints/purge.py``) drives it: a dry run
by default; ``--yes`` deletes.

Which retention a run gets: ``--older-than`` when given; else the run's own ``[store] retention`` (recorded
with the run when it started: that is the per-run setting); else the global one, the ``[store] retention``
of ``--config``. A run with none of them is kept. Rollouts without a run (a gateway used on its own) get
``--older-than`` or the global retention. What a purge removes and keeps: ``harnessrl/store/retention.py``
and docs/retention.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessrl.store.retention import PurgeCounts, parse_duration

if TYPE_CHECKING:
    from harnessrl.store import Store
    from harnessrl.types import Run


@dataclass(frozen=True, slots=True)
class Target:
    """One run (``run_id`` None: the rollouts without a run) and the retention that applies to it."""

    run_id: str | None
    retention: str
    source: str  # "--older-than", "run config" or "global"


def run_retention(run: Run) -> str | None:
    """The ``[store] retention`` a run was started with, if any."""
    store = run.config.get("store") if isinstance(run.config, dict) else None
    value = store.get("retention") if isinstance(store, dict) else None
    return value if isinstance(value, str) else None


def targets(
    runs: Sequence[Run], *, older_than: str | None, global_retention: str | None, runless: bool
) -> tuple[list[Target], list[str]]:
    """``(what to purge with which retention, ids of runs kept because no retention applies)``."""
    out, unset = [], []
    for run in runs:
        if older_than is not None:
            out.append(Target(run.id, older_than, "--older-than"))
        elif (own := run_retention(run)) is not None:
            out.append(Target(run.id, own, "run config"))
        elif global_retention is not None:
            out.append(Target(run.id, global_retention, "global"))
        else:
            unset.append(run.id)
    if runless and (older_than or global_retention):
        out.append(
            Target(None, older_than or global_retention or "", "--older-than" if older_than else "global")
        )
    return out, unset


def purge(
    store: Store, plan: Sequence[Target], *, dry_run: bool = True, now: float | None = None
) -> list[tuple[Target, PurgeCounts]]:
    """Purge (or count) each target with its own cutoff; a run that has not ended is only counted as held."""
    now = time.time() if now is None else now
    return [
        (
            t,
            store.purge(
                finished_before=now - parse_duration(t.retention), run_ids=[t.run_id], dry_run=dry_run
            ),
        )
        for t in plan
    ]


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError


def report(results: Sequence[tuple[Target, PurgeCounts]], unset: Sequence[str], dry_run: bool) -> list[str]:
    """The lines ``harnessrl purge`` prints: one per run with something to say, then the total."""
    verb = "would purge" if dry_run else "purged"
    lines = []
    total = PurgeCounts()
    for target, c in results:
        total += c
        if not c.rollouts and not c.held_rollouts:
            continue
        who = f"run {target.run_id}" if target.run_id else "rollouts without a run"
        line = f"{who} (retention {target.retention}, {target.source}): {verb} {c.rollouts} rollouts, {c.calls} calls"
        if c.held_rollouts:
            line += f"; kept {c.held_rollouts} older rollouts: the run has not ended"
        lines.append(line)
    if unset:
        lines.append(
            f"{len(unset)} runs kept: no retention set for them (set [store] retention or --older-than)"
        )
    lines.append(
        f"{'dry run: ' if dry_run else ''}{verb} {total.rollouts} rollouts, {total.calls} calls, "
        f"{human_bytes(total.bytes)} of request/response text, token arrays and logs"
        + (
            f"; {total.held_rollouts} rollouts held by runs that have not ended"
            if total.held_rollouts
            else ""
        )
    )
    if dry_run:
        lines.append("nothing deleted: run again with --yes to purge")
    return lines


# -- the command -----------------------------------------------------------------------------------------
