"""An eval's figures for people: the terminal table, the Markdown report and its plot (PNG).

The terminal and Markdown show the same rows: one per checkpoint and harness, each figure with its interval,
then the paired comparisons, then what was not scored and why (infra failures, unscored tasks).
"""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harnessrl.evaluation.estimators import Interval
from harnessrl.evaluation.figures import CellFigures
from harnessrl.evaluation.results import EvalFigures

#: Infra failures listed by name in a report; the rest are counted.
INFRA_LISTED = 20


def _n(v: float, digits: int = 1) -> str:
    return "n/a" if math.isnan(v) else f"{v:,.{digits}f}"


def row(cell: CellFigures) -> list[str]:
    """One cell as the table's cells (shared by the terminal and Markdown)."""
    unscored = len(cell.unscored_tasks)
    passk = str(cell.passk) + (f" ({cell.passk_tasks} tasks)" if cell.passk_tasks != len(cell.scored_tasks) else "")
    return [cell.checkpoint, cell.harness, f"{len(cell.scored_tasks)}" + (f" (+{unscored} unscored)" if unscored else ""),
            str(cell.pass1), passk, str(cell.reward), str(cell.attempts), str(len(cell.infra)),
            _n(cell.tokens_per_attempt, 0), _n(cell.seconds_per_attempt)]


def headers(figures: EvalFigures) -> list[str]:
    return ["checkpoint", "harness", "tasks", "pass@1", f"pass@{figures.k}", "mean reward", "attempts", "infra",
            "tokens/attempt", "s/attempt"]


def settings_line(figures: EvalFigures, temperature: float | None) -> str:
    return (f"{len(figures.task_ids)} tasks x {figures.attempts} attempts per cell; success = reward >= "
            f"{figures.success_at:g}; temperature {'engine default' if temperature is None else f'{temperature:g}'}; "
            f"[low, high]: the {figures.level:.0%} bootstrap interval over tasks")


def print_report(figures: EvalFigures, console: Console, temperature: float | None = None) -> None:
    table = Table(title="harnessrl eval", caption=escape(settings_line(figures, temperature)))
    for h in headers(figures):
        table.add_column(h, overflow="fold")
    for cell in figures.cells:
        table.add_row(*(escape(c) for c in row(cell)))
    console.print(table)
    for cmp in figures.comparisons:
        console.print(escape(f"{cmp.a.checkpoint} / {cmp.a.harness} - {cmp.b.checkpoint} / {cmp.b.harness}: "
                             f"pass@1 {signed(cmp.difference)} over {cmp.tasks} tasks: {cmp.verdict}"))
    for line in _not_scored(figures):
        console.print(escape(line), style="yellow")
    if temperature == 0 and figures.k > 1:
        console.print(f"temperature 0: every attempt of a task is the same, so pass@{figures.k} says nothing pass@1 "
                      "does not ([eval] temperature = 1.0 samples)", style="yellow")


def signed(d: Interval) -> str:
    if math.isnan(d.value):
        return "n/a"
    return f"{d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def _not_scored(figures: EvalFigures) -> list[str]:
    lines: list[str] = []
    for cell in figures.cells:
        if cell.unscored_tasks:
            lines.append(f"{cell.checkpoint} / {cell.harness}: {len(cell.unscored_tasks)} task(s) unscored (every "
                         f"attempt infra or without a reward): {', '.join(cell.unscored_tasks[:10])}")
        for a in cell.infra[:INFRA_LISTED]:
            lines.append(f"  infra: {a.rollout.id} ({a.rollout.task_id}): {(a.rollout.error or '')[:200]}")
        if len(cell.infra) > INFRA_LISTED:
            lines.append(f"  ... and {len(cell.infra) - INFRA_LISTED} more infra attempts")
    return lines


def grid_symbol(reward: float | None, infra: bool, success_at: float) -> str:
    """One attempt in the per-task grid: a success, a failure, a partial reward, or infra."""
    if infra:
        return "i"
    if reward is None:
        return "-"
    return "✓" if reward >= success_at else ("✗" if reward <= 0 else f"{reward:g}")


def markdown(figures: EvalFigures, *, temperature: float | None, title: str, plot: str | None) -> str:
    """The report as Markdown: settings, the matrix, the comparisons, the plot, the per-task grid, infra."""
    out = [f"# {title}", "", settings_line(figures, temperature), ""]
    hs = headers(figures)
    out += ["| " + " | ".join(hs) + " |", "|" + "---|" * len(hs)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row(cell)) + " |" for cell in figures.cells]
    if figures.comparisons:
        out += ["", "## Paired comparisons (pass@1, by task)", "", "| a | b | a - b | tasks | verdict |",
                "|---|---|---|---|---|"]
        out += [f"| {c.a.checkpoint} / {c.a.harness} | {c.b.checkpoint} / {c.b.harness} | {signed(c.difference)} "
                f"| {c.tasks} | {c.verdict} |" for c in figures.comparisons]
    if plot:
        out += ["", f"![pass@1 and pass@{figures.k} per cell]({plot})"]
    out += ["", "## Per task", "", "✓ success, ✗ 0, a number: partial reward, i: infra, -: no reward", ""]
    names = [f"{c.checkpoint} / {c.harness}" for c in figures.cells]
    out += ["| task | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for t in figures.task_ids:
        marks = []
        for cell in figures.cells:
            result = cell.tasks.get(t)
            marks.append("".join(grid_symbol(a.reward, a.infra, figures.success_at) for a in result.attempts)
                         if result else "")
        out.append(f"| {t} | " + " | ".join(marks) + " |")
    rest = _not_scored(figures)
    if rest:
        out += ["", "## Not scored", ""] + [f"- {line.strip()}" for line in rest]
    return "\n".join(out) + "\n"


def plot_png(figures: EvalFigures, path: Path) -> None:
    """pass@1 and pass@k per cell as bars with their intervals (matplotlib, drawn without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"{c.checkpoint}\n{c.harness}" for c in figures.cells]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(names) + 1), 3.6), dpi=120)
    width = 0.38
    for i, (what, pick) in enumerate((("pass@1", lambda c: c.pass1), (f"pass@{figures.k}", lambda c: c.passk))):
        vals = [pick(c) for c in figures.cells]
        xs = [j + (i - 0.5) * width for j in range(len(names))]
        ys = [0.0 if math.isnan(v.value) else v.value for v in vals]
        err = [[0.0 if math.isnan(v.value) else v.value - v.low for v in vals],
               [0.0 if math.isnan(v.value) else v.high - v.value for v in vals]]
        ax.bar(xs, ys, width, yerr=err, capsize=3, label=what)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of tasks")
    ax.legend(fontsize=8)
    ax.set_title(f"{len(figures.task_ids)} tasks, {figures.level:.0%} intervals over tasks", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(figures: EvalFigures, out: Path, *, temperature: float | None, title: str) -> Path:
    """``--out report.md``: the Markdown and, beside it, ``<name>.png``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    plot_png(figures, png)
    out.write_text(markdown(figures, temperature=temperature, title=title, plot=png.name))
    return png
