"""How well a judge agrees with people on a labelled set: accuracy, Spearman, position bias.

The figures ``harnessrl judge-check`` prints (``harnessrl/entrypoints/judge_check.py`` describes them
and the labelled JSONL); benchmarks compare judge modes with them too.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.rewards.judge import Judge, JudgeItem, Verdict
from harnessrl.rewards.judge_transcript import render_messages


@dataclass(frozen=True, slots=True)
class Labelled:
    task_id: str
    item: JudgeItem
    label: float


@dataclass
class CheckReport:
    """The agreement figures; ``None`` where a figure cannot be computed (too few scored answers)."""

    answers: int
    scored: int
    accuracy: float | None
    spearman: float | None
    mode: str
    model: str
    shuffles: int = 0
    position_shift: float | None = None
    top_changed: float | None = None
    first_gain: float | None = None
    last_gain: float | None = None
    errors: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        def f(x: float | None, pct: bool = False) -> str:
            return "n/a" if x is None else (f"{100 * x:.1f}%" if pct else f"{x:.3f}")

        out = [f"judge {self.model} ({self.mode}) on {self.answers} labelled answers: {self.scored} scored"
               + (f", {len(self.errors)} without a valid score" if self.errors else ""),
               f"accuracy: {f(self.accuracy, pct=True)}", f"spearman: {f(self.spearman)}"]
        if self.shuffles:
            out.append(f"position bias over {self.shuffles} shuffled orders: mean |score change| "
                       f"{f(self.position_shift)}, best answer changed in {f(self.top_changed, pct=True)} of groups, "
                       f"score change when moved to the first place {f(self.first_gain)}, to the last place "
                       f"{f(self.last_gain)}")
        elif self.mode == "pointwise":
            out.append("position bias: n/a (pointwise: each answer is judged alone)")
        out += [f"  error: {e}" for e in self.errors[:5]]
        return out


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the average of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson on average ranks); None when either side is constant or too short."""
    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


def load_labelled(path: Path, default_rubric: str | None, **limits: Any) -> list[Labelled]:
    """The labelled answers; ``limits`` are the transcript's (``render_messages``), as in a run."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            task_input = rec.get("input") or {}
            messages = rec.get("messages") or [
                {"role": "user", "content": str(task_input.get("question") or json.dumps(task_input))},
                {"role": "assistant", "content": str(rec["answer"])}]
            rubric = rec.get("rubric") or default_rubric
            if not rubric:
                raise ValueError("no rubric: give the line a 'rubric' or set [rewards.judge] rubric")
            label = float(rec["label"])
            if not 0.0 <= label <= 1.0:
                raise ValueError(f"label {label} is outside [0, 1]")
            out.append(Labelled(str(rec["task_id"]), JudgeItem(task_input, rubric, render_messages(messages, **limits)),
                                label))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SystemExit(f"{path}:{n}: {type(exc).__name__}: {exc} (see `harnessrl judge-check --help`)") from None
    if not out:
        raise SystemExit(f"{path} has no labelled answers")
    return out


def _groups(rows: Sequence[Labelled]) -> list[list[int]]:
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_task.setdefault(row.task_id, []).append(i)
    return list(by_task.values())


async def check(judge: Judge, rows: Sequence[Labelled], *, shuffles: int = 2, threshold: float = 0.5,
                seed: int = 0) -> CheckReport:
    """Score ``rows`` with ``judge`` and compute the agreement figures."""
    groups = _groups(rows)
    verdicts: dict[int, Verdict] = {}
    if judge.config.mode == "group":
        answered = await asyncio.gather(*(judge.judge([rows[i].item for i in g]) for g in groups))
        for g, vs in zip(groups, answered, strict=True):
            verdicts.update(zip(g, vs, strict=True))
    else:
        verdicts.update(enumerate(await judge.judge([r.item for r in rows])))
    scored = [i for i in range(len(rows)) if verdicts[i].score is not None]
    scores = [float(verdicts[i].score or 0.0) for i in scored]
    labels = [rows[i].label for i in scored]
    agree = [(s >= threshold) == (lab >= threshold) for s, lab in zip(scores, labels, strict=True)]
    report = CheckReport(
        answers=len(rows), scored=len(scored), accuracy=statistics.fmean(agree) if agree else None,
        spearman=spearman(scores, labels), mode=judge.config.mode, model=await judge.model(),
        errors=[str(verdicts[i].error) for i in range(len(rows)) if verdicts[i].score is None])
    if judge.config.mode == "group" and shuffles > 0:
        await _position_bias(judge, rows, groups, verdicts, shuffles, seed, report)
    return report


async def _position_bias(judge: Judge, rows: Sequence[Labelled], groups: list[list[int]],
                         base: dict[int, Verdict], shuffles: int, seed: int, report: CheckReport) -> None:
    rng = random.Random(seed)
    orders = []
    for g in groups:
        if len(g) < 2:
            continue
        for _ in range(shuffles):
            order = g[:]
            while order == g:  # a different order, so the answer's place is all that changed
                rng.shuffle(order)
            orders.append((g, order))
    answered = await asyncio.gather(*(judge.judge([rows[i].item for i in order]) for _, order in orders))
    shifts, first, last, changed = [], [], [], []
    for (g, order), vs in zip(orders, answered, strict=True):
        got = {i: v.score for i, v in zip(order, vs, strict=True)}
        if any(s is None for s in got.values()) or any(base[i].score is None for i in g):
            continue
        shifts += [abs(float(got[i] or 0) - float(base[i].score or 0)) for i in g]
        first.append(float(got[order[0]] or 0) - float(base[order[0]].score or 0))
        last.append(float(got[order[-1]] or 0) - float(base[order[-1]].score or 0))
        tops = [{i for i in ids if score[i] == max(score[i] for i in ids)}
                for ids, score in ((g, {i: float(base[i].score or 0) for i in g}), (order, {i: float(got[i] or 0)
                                                                                           for i in order}))]
        changed.append(tops[0] != tops[1])
    report.shuffles = shuffles
    report.position_shift = statistics.fmean(shifts) if shifts else None
    report.top_changed = statistics.fmean(changed) if changed else None
    report.first_gain = statistics.fmean(first) if first else None
    report.last_gain = statistics.fmean(last) if last else None
