"""``harnessrl rollouts`` and ``harnessrl show``: the store as tables in a terminal (rich).

The same words and columns as the dashboard: a page of rollouts (run, step, task, status, failure kind,
reward, calls, duration), and one rollout with its rewards, calls, samples and the tail of its logs.
Text from the store is printed with markup disabled: a prompt cannot restyle or fake the table.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harnessrl.inspection.rollout_pages import Filters, RolloutRow, rollout_page
from harnessrl.store import Store


def _secs(s: float | None) -> str:
    return "" if s is None else f"{s:.1f}s"


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def rollouts_table(rows: list[RolloutRow], title: str = "rollouts", show_run: bool = True) -> Table:
    """The rollout id column never shrinks (people copy it into ``harnessrl show``)."""
    t = Table(title=title, title_justify="left")
    id_width = max((len(r.rollout.id) for r in rows), default=7)
    cols = [("rollout", "left"), ("run", "left"), ("step", "right"), ("task", "left"), ("status", "left"),
            ("failure", "left"), ("reward", "right"), ("calls", "right"), ("duration", "right"),
            ("version", "right")]
    for col, just in cols:
        if col == "run" and not show_run:
            continue
        t.add_column(col, justify=just, no_wrap=col == "rollout",  # type: ignore[arg-type]
                     min_width=id_width if col == "rollout" else None)
    for row in rows:
        r = row.rollout
        cells = [r.id, r.run_id or "", "" if r.step is None else str(r.step), r.task_id, r.status.value,
                 r.failure_kind.value if r.failure_kind else "", _num(row.reward),
                 str(row.calls), _secs(row.duration_s), str(r.policy_version)]
        if not show_run:
            del cells[1]
        t.add_row(*(Text(x) for x in cells))
    return t


def print_rollouts(store: Store, filters: Filters, limit: int, console: Console) -> int:
    rows, more = rollout_page(store, filters, page_size=limit)
    console.print(rollouts_table(rows, show_run=filters.run is None))
    if more:
        console.print(Text(f"more rollouts follow: --offset {filters.page * limit + limit}"), style="dim")
    return len(rows)


def print_rollout(store: Store, rollout_id: str, console: Console, log_lines: int = 40) -> None:
    """One rollout: facts, rewards, calls (with how each was trained), samples, last log lines."""
    from harnessrl.inspection.rollout_view import call_training, rollout_view

    v = rollout_view(store, rollout_id)
    r = v.rollout
    facts = Table.grid(padding=(0, 2))
    for k, val in (("rollout", r.id), ("run", r.run_id or ""), ("task", r.task_id), ("group", r.group_id),
                   ("step", "" if r.step is None else str(r.step)),
                   ("status", r.status.value + (f" ({r.failure_kind.value})" if r.failure_kind else "")),
                   ("policy version", str(r.policy_version)), ("duration", _secs(v.duration_s)),
                   ("exit code", "" if r.exit_code is None else str(r.exit_code)), ("error", r.error or "")):
        facts.add_row(Text(k, style="bold"), Text(val))
    if r.purged_at is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(r.purged_at))
        facts.add_row(Text("purged", style="bold"),
                      Text(f"{when}: retention deleted its calls' text and token arrays and its logs"))
    console.print(facts)
    rewards = Table(title="rewards", title_justify="left")
    for col in ("name", "value", "call"):
        rewards.add_column(col)
    for w in v.rewards:
        rewards.add_row(Text(w.name), _num(w.value), "" if w.call_index is None else str(w.call_index))
    console.print(rewards)
    if v.judge_calls:  # what a model judge said ([rewards.judge]): recorded, never trained
        judged = Table(title="judge calls", title_justify="left")
        for col in ("#", "model", "mode", "status", "score", "reason", "tries", "latency"):
            judged.add_column(col)
        for j in v.judge_calls:
            mode = j.mode + (f" (attempt {j.position})" if j.mode == "group" else "")
            judged.add_row(str(j.index), Text(j.model), mode, j.status, _num(j.score),
                           Text((j.reason or "") + (f" {j.error}" if j.error else "")), str(j.attempts),
                           _secs(j.latency_s))
        console.print(judged)
    calls = Table(title="calls", title_justify="left")
    for col in ("#", "api", "status", "version", "fidelity", "prompt", "completion", "trained", "latency", "note"):
        calls.add_column(col)
    for c in v.calls:
        tr = call_training(c, v.samples)
        calls.add_row(str(c.index), c.api.value, c.status.value, str(c.policy_version),
                      Text((c.fidelity.value if c.fidelity else "") + (f": {c.fidelity_reason}" if c.fidelity_reason else "")),
                      str(len(c.prompt_token_ids)), str(len(c.completion_token_ids)), str(tr.trained_tokens),
                      _secs(c.latency_s), Text("; ".join(x for x in (tr.note, tr.clamp) if x)))
    console.print(calls)
    if v.refusals:  # what the harness was told when a call failed: the first thing to read when it failed
        refused = Table(title="refused and failed calls", title_justify="left")
        for col in ("#", "status", "route", "code", "reason"):
            refused.add_column(col)
        for f in v.refusals:
            refused.add_row(str(f.index), f.status.value, Text(f.route), Text(f.code), Text(f.reason[:300]))
        console.print(refused)
    samples = Table(title="samples", title_justify="left")
    for col in ("sample", "fidelity", "reason", "calls", "tokens", "trained"):
        samples.add_column(col)
    for i, s in enumerate(v.samples.samples):
        samples.add_row(str(i), s.fidelity.value, Text(s.fidelity_reason or ""),
                        " ".join(map(str, s.call_indices)), str(len(s.token_ids)), str(sum(s.loss_mask)))
    console.print(samples)
    if r.logs:
        tail = r.logs.splitlines()[-log_lines:]
        console.print(Text(f"last {len(tail)} log lines:", style="bold"))
        console.print(Text("\n".join(tail)))
