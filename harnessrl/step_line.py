"""The line a training run prints after each step, in figures that say whether the policy moved.

On-policy GRPO's loss is ~0 by construction (docs/training.md), so ``loss 0.0000`` read as "nothing is
learning" on steps that trained. The line shows the update instead: the gradient norm before clipping (0
when nothing was trained) and how many optimizer updates ran; the loss stays in ``metrics.jsonl`` (and on
the line for the SFT objectives of ``rft``/``distill``, where it is not ~0).

It also says when tools were offered and not one attempt of the step got a tool result back: a harness
that stops at its own permission prompt (docs/harnesses.md, autonomy flags) earns rewards of 0 for reasons
outside the model, and nothing else on the line would show it; and when calls were left out as greedy (a
harness that asks for temperature 0, such as aider, trains nothing unless a temperature is pinned).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessrl.training.metrics import summed
from harnessrl.types import Call

if TYPE_CHECKING:
    from harnessrl.config import HarnessConfig
    from harnessrl.controller import StepReport
    from harnessrl.store import Store

#: Run modes whose objective is SFT-like: the loss there is a real, non-zero figure.
_LOSS_MODES = ("rft", "distill")


@dataclass(frozen=True, slots=True)
class ToolUse:
    """How a step's attempts used tools. Counting stops at the first tool result, so the figures are
    complete only when ``results`` is 0 (the case the step line reports)."""

    attempts: int = 0
    offered: int = 0  # attempts whose harness offered the model tools
    called: int = 0  # attempts where the model asked for a tool
    results: int = 0  # attempts whose harness sent a tool result back


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _largest(metrics: Mapping[str, Any], key: str) -> float:
    """``key``, or over ``[policies]`` the largest ``policy/<name>/<key>``."""
    if key in metrics:
        return float(metrics[key])
    return max((float(v) for k, v in metrics.items() if k.startswith("policy/") and k.endswith(f"/{key}")),
               default=0.0)


def update_figure(metrics: Mapping[str, Any], mode: str = "sync") -> str:
    """``grad norm 0.412`` (with ``x3 updates`` when more than one), or ``no update``; the loss first in
    the SFT modes."""
    loss = f"loss {float(metrics.get('loss', 0.0)):.4f} " if mode in _LOSS_MODES else ""
    updates = int(summed(metrics, "updates"))
    if updates == 0:
        return loss + "no update"
    many = f" x{updates} updates" if updates > 1 else ""
    return f"{loss}grad norm {_largest(metrics, 'grad_norm'):.3g}{many}"


def tool_phrase(use: ToolUse) -> str | None:
    """What the step line says when tools were offered and no attempt got a single tool result."""
    if use.results or not use.offered:
        return None
    if use.called:
        return (f"no tool results: the model asked for tools in {use.called} of {use.attempts} attempts and no "
                "harness sent a result back (does it need its autonomy flag? docs/harnesses.md)")
    return f"no tool results: tools were offered in {use.offered} of {use.attempts} attempts and none called"


def greedy_phrase(metrics: Mapping[str, Any], config: HarnessConfig) -> str | None:
    """What the step line says when calls were left out of training for being greedy (temperature 0)."""
    greedy = int(summed(metrics, "count/excluded.greedy"))
    if not greedy:
        return None
    fix = ("set [run] train_temperature (e.g. 1.0)" if config.run.train_temperature is None
           else "[run] train_temperature is set: did [gateway] pinned_sampling or the engine force 0?")
    return f"{greedy} greedy calls not trained (temperature 0: nothing to learn from; {fix})"


def step_line(step: int, config: HarnessConfig, rep: StepReport, tools: ToolUse | None = None) -> str:
    """One step's summary: reward, rollouts, groups trained, the update, diagnostics and timings."""
    m = rep.metrics
    groups = m.get("count/dynamic.groups", 0) + m.get("count/dynamic.extra_groups", 0)
    trained = f"{m.get('count/groups.trained', 0)}/{groups}" + (
        f" (held: no {config.run.explore_until_reward:g} yet)" if m.get("count/explore.held") else "")
    phrases = [p for p in (tool_phrase(tools) if tools is not None else None, greedy_phrase(m, config)) if p]
    figure = update_figure(m, config.run.mode)
    # A step without an update has no clip fraction, KL or entropy: zeros there would read as measurements.
    diagnostics = "" if int(summed(m, "updates")) == 0 else (
        f" clip {m.get('clip_fraction', 0):.3f} kl {m.get('approx_kl', 0):.4f} entropy {m.get('entropy', 0):.2f}")
    return (
        f"step {step}/{config.run.steps}: reward {_fmt(rep.reward_mean)} | rollouts "
        f"{rep.rollouts} (failed {rep.failed}, infra {rep.infra}) | groups trained {trained}"
        + (f" replayed {m.get('count/replay.rollouts', 0)}" if config.training.replay_best else "")
        + f" | {figure}{diagnostics} | "
        + " ".join(f"{k} {v:.0f}s" for k, v in rep.seconds.items())
        + "".join(f" | {p}" for p in phrases))


# -- tool use, read from the recorded calls --------------------------------------------------------------
def _offers_tools(request: Mapping[str, Any]) -> bool:
    return bool(request.get("tools") or request.get("functions"))


def _has_tool_result(request: Mapping[str, Any]) -> bool:
    """A tool's output in the prompt: a ``tool``/``function`` message (chat), a ``tool_result`` block
    (Anthropic Messages) or a ``*_call_output`` input item (Responses)."""
    for m in request.get("messages") or ():
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("tool", "function"):
            return True
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                             for b in content):
            return True
    items = request.get("input")
    return isinstance(items, list) and any(
        isinstance(i, dict) and str(i.get("type", "")).endswith("_call_output") for i in items)


def _asks_for_tool(response: Mapping[str, Any] | None) -> bool:
    """The model's answer calls a tool: ``tool_calls`` (chat), a ``tool_use`` block (Anthropic) or a
    ``*_call`` output item (Responses)."""
    if not response:
        return False
    for choice in response.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and (message.get("tool_calls") or message.get("function_call")):
            return True
    blocks = response.get("content")
    if isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
        return True
    output = response.get("output")
    return isinstance(output, list) and any(
        isinstance(i, dict) and str(i.get("type", "")).endswith("_call") for i in output)


def tool_use(attempts: Iterable[Sequence[Call]]) -> ToolUse:
    """Count tool use over attempts (each its recorded calls), stopping at the first tool result."""
    n = offered = called = 0
    for calls in attempts:
        n += 1
        requests = [c.request for c in calls if isinstance(c.request, dict)]
        if any(_has_tool_result(r) for r in requests):
            return ToolUse(n, offered + 1, called + 1, 1)
        offered += any(_offers_tools(r) for r in requests)
        called += any(_asks_for_tool(c.response) for c in calls)
    return ToolUse(n, offered, called, 0)


def step_tool_use(store: Store, run_id: str, step: int) -> ToolUse:
    """``tool_use`` over ``step``'s attempts as the store has them (blocking: run it in a thread)."""
    return tool_use(store.get_calls(r.id) for r in store.iter_rollouts(run_id=run_id, step=step))
