"""Why each chain of a rollout starts where it does: compaction, sub-agent or another break (pure functions).

A *chain* is one sample of a rollout: calls whose prompts extend one another token for token
(``samples.build_samples``). A rollout has several chains when its harness compacts its history (Claude Code's
auto-compact, Codex's compaction, OpenHands' condenser), runs a sub-agent or a side conversation, or rewrites
earlier turns. Every chain is trained with the rollout's advantage; this module only says *why* each one
started, so a dashboard, an export or a test can tell a compaction from a broken template.

The call records say nothing about the harness's intent, so the labels are a heuristic on the tokens alone:

- ``sub_agent``: a chain opened before this one is extended again after this one starts (the parent goes
  on while this conversation runs beside it). Its parent is the chain of the latest earlier call whose
  completion this prompt carries (the task the parent wrote), else of the latest earlier call whose chain goes
  on. A harness's side calls (a title, a topic check) are labelled the same way.
- ``compaction``: the prompt is shorter than the previous call's prompt + completion and carries that call's
  completion (the summary): the history was replaced by it. That previous call is ``summary_call``; if it
  opened a chain of its own (a summary request with its own system prompt) that chain is labelled ``summary``
  (a summary request may itself look like a compaction: a shorter prompt, without the tools, that carries the
  last answer; the chain after it, carrying its answer, settles which is which).
- ``prefix_break``: anything else (history edited, truncated or re-rendered; tools changed); its parent is the
  earlier chain sharing the longest prefix.

"Carries" means: some 16-token window of the completion (taken every 8 tokens) appears in the prompt after
the prefix it shares with earlier chains. A summary shorter than 16 tokens is not recognised (the chain is
then a ``prefix_break``), which only changes the label, never what is trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harnessrl.types import ChainStart

#: Window (tokens) that must reappear for a completion to count as carried, and the stride between windows.
WINDOW, STRIDE = 16, 8


@dataclass(frozen=True, slots=True)
class Step:
    """One trained call as the sample builder placed it: its chain and its tokens."""

    call_index: int
    chain: int
    prompt: Sequence[int]
    completion: Sequence[int]


@dataclass(frozen=True, slots=True)
class Break:
    """A chain that did not extend any earlier one: its number, its first step, and the earlier chain that
    shares the longest prefix with its first prompt (``shared`` tokens of it)."""

    chain: int
    first_step: int
    closest: int
    shared: int


@dataclass(frozen=True, slots=True)
class ChainLabel:
    """Why a chain starts, the chain it came from, and (compaction) the call that wrote the summary."""

    start: ChainStart
    parent: int | None = None
    summary_call: int | None = None


def _windows(prompt: Sequence[int], skip: int) -> set[tuple[int, ...]]:
    """Every ``WINDOW``-token window of ``prompt`` after its first ``skip`` tokens."""
    tail = tuple(prompt[skip:])
    return {tail[i:i + WINDOW] for i in range(len(tail) - WINDOW + 1)}


def _carried(windows: set[tuple[int, ...]], completion: Sequence[int]) -> bool:
    """Whether a window of ``completion`` (one every ``STRIDE`` tokens) is among the prompt's ``windows``."""
    return any(tuple(completion[i:i + WINDOW]) in windows for i in range(0, len(completion) - WINDOW + 1, STRIDE))


def label_breaks(steps: Sequence[Step], breaks: Sequence[Break]) -> dict[int, ChainLabel]:
    """Label each chain in ``breaks`` (see the module docstring); a chain the summary request opened is
    relabelled ``summary``."""
    last_step: dict[int, int] = {}
    first_step: dict[int, int] = {}
    for i, s in enumerate(steps):
        last_step[s.chain] = i
        first_step.setdefault(s.chain, i)
    labels: dict[int, ChainLabel] = {}
    for b in breaks:
        p = b.first_step
        prompt = steps[p].prompt
        windows = _windows(prompt, b.shared)
        going_on = {c for c, last in last_step.items() if c != b.chain and first_step[c] < p < last}
        if going_on:
            earlier = [q for q in range(p - 1, -1, -1) if steps[q].chain in going_on]
            parent = next((steps[q].chain for q in earlier if _carried(windows, steps[q].completion)),
                          steps[earlier[0]].chain)
            labels[b.chain] = ChainLabel(ChainStart.SUB_AGENT, parent)
            continue
        prev = steps[p - 1] if p > 0 else None
        if (prev is not None and len(prompt) < len(prev.prompt) + len(prev.completion)
                and _carried(windows, prev.completion)):
            labels[b.chain] = ChainLabel(ChainStart.COMPACTION, prev.chain, prev.call_index)
            opened = labels.get(prev.chain)
            if first_step[prev.chain] == p - 1 and opened is not None and opened.start != ChainStart.SUB_AGENT:
                labels[prev.chain] = ChainLabel(ChainStart.SUMMARY, opened.parent)  # the summary request's chain
            continue
        labels[b.chain] = ChainLabel(ChainStart.PREFIX_BREAK, b.closest)
    return labels
