"""What a run cost, recorded by the run itself: per step, per held-out evaluation and in total.

Users compare frameworks by cost per accepted outcome, so a run writes its own figures instead of leaving
them to ``/usr/bin/time`` and a query: each ``step`` / ``sft_step`` event of ``events.jsonl`` carries a
``cost`` record, so does each ``eval`` event, and the run's end appends a ``cost`` event with their sums
(``run_cost``, which the dashboard and ``harnessrl show RUN`` also compute from the records of a run in
progress) and prints ``cost_lines``. What each figure measures is ``FIELDS``; none is estimated.

Figures of the process (engine busy time, CPU seconds) are what it did since the previous record, so a step
collected beside an evaluation (step 1, async mode) shares them with it; summed over a run they are exact for
every invocation that reached a record. Calls, tokens and attempt times come from the store and belong to
the record's own rollouts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import resource
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.memory import peak_rss_bytes
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.training.metrics import summed

if TYPE_CHECKING:
    from harnessrl.config import HarnessConfig
    from harnessrl.store import Store
    from harnessrl.types import Rollout

#: Each figure and what it measures, in the order tables show them.
FIELDS: dict[str, str] = {
    "attempts": "attempts launched (every rollout of the step or evaluation, infra failures and re-runs included)",
    "successes": "attempts whose outcome reward reached success_at",
    "calls": "model calls recorded in the store for those attempts, whatever their status",
    "refused_calls": "of those, calls the gateway answered with an error before the engine was asked "
                     "(status refused: the API's rules, a budget, an unknown route)",
    "clamped_calls": "of those, calls whose max_tokens was lowered below what they asked for (a configured cap, "
                     "the rollout's budget, the room the context left)",
    "stopped_at_clamp": "of the clamped calls, those whose answer ended at the lowered limit (finish_reason "
                        "length): the attempt went on from where the harness did not choose",
    "prompt_tokens": "prompt tokens of those calls (each call's whole prompt, shared prefixes counted each time)",
    "completion_tokens": "completion tokens the engine sampled for those calls (every choice)",
    "tokens_trained": "tokens the optimizer step trained on (loss mask 1; metrics.jsonl tokens/trained)",
    "engine_busy_s": "seconds the embedded engine spent in prefill and decode since the previous record "
                     "(idle and weight swaps excluded; none for an engine URL)",
    "call_s": "recorded call latencies summed: the gateway's time per call, queueing included; calls overlap",
    "trainer_s": "the step's training phase as the controller times it: batch built from the store, then the "
                 "optimizer step",
    "harness_s": "attempt durations summed: from the harness's start (rollout running) to the rollout's close, "
                 "scoring included",
    "publish_s": "pausing the gateway, handing the engine the new weights, writing the checkpoint",
    "cpu_s": "CPU seconds (user + system) of the harnessrl process since the previous record; a process's "
             "first record includes its start and model load",
    "children_cpu_s": "CPU seconds of the processes it started that have ended since the previous record "
                      "(local harnesses, verifiers)",
    "peak_rss_bytes": "the harnessrl process's largest resident memory so far (VmHWM: engine, gateway and trainer; "
                      "not the harnesses)",
}


@dataclass(frozen=True, slots=True)
class Cost:
    """One record's figures (a step, an evaluation) or a sum of them; ``+`` adds, the peak is the larger."""

    attempts: int = 0
    successes: int = 0
    calls: int = 0
    refused_calls: int = 0
    clamped_calls: int = 0
    stopped_at_clamp: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_trained: int = 0
    engine_busy_s: float | None = None
    call_s: float = 0.0
    trainer_s: float = 0.0
    harness_s: float = 0.0
    publish_s: float = 0.0
    cpu_s: float = 0.0
    children_cpu_s: float = 0.0
    peak_rss_bytes: int | None = None

    def __add__(self, other: Cost) -> Cost:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a is None or b is None:
                values[f.name] = b if a is None else a
            else:
                values[f.name] = max(a, b) if f.name == "peak_rss_bytes" else a + b
        return Cost(**values)

    def record(self) -> dict[str, Any]:
        """The JSON object written to ``events.jsonl`` (seconds rounded to ms)."""
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Cost:
        """A record as written, forgiving of missing or malformed figures (an older or hand-edited file)."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v = record.get(f.name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                continue
            values[f.name] = int(v) if f.type in ("int", "int | None") else float(v)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RunCost:
    """A run's records summed: its training steps and its held-out evaluations."""

    steps: int
    train: Cost
    held_out: Cost
    success_at: float | None  # the threshold the steps counted successes at (the last one recorded)

    @property
    def total(self) -> Cost:
        return self.train + self.held_out

    def record(self) -> dict[str, Any]:
        return {"steps": self.steps, "success_at": self.success_at, "train": self.train.record(),
                "held_out": self.held_out.record(), "total": self.total.record()}


def success_threshold(config: HarnessConfig) -> float:
    """The reward at which an attempt is a success: ``[sft] min_reward``, else 1.0, the bar rejection sampling
    (``[run] mode = "rft"``) and ``harnessrl sft`` accept an attempt at."""
    return 1.0 if config.sft.min_reward is None else config.sft.min_reward


def attempts_cost(store: Store, rollouts: Sequence[Rollout], success_at: float) -> Cost:
    """What the store records of these attempts: calls, tokens, harness time, successes (blocking)."""
    ids = [r.id for r in rollouts]
    usage = store.call_usage(ids)
    stats = store.rollout_stats(ids)
    successes = sum(1 for s in stats.values() if (v := rollout_reward(s.rewards)) is not None and v >= success_at)
    harness = sum(r.finished_at - r.started_at for r in rollouts
                  if r.started_at is not None and r.finished_at is not None)
    return Cost(attempts=len(ids), successes=successes, calls=usage.calls, refused_calls=usage.refused,
                clamped_calls=usage.clamped, stopped_at_clamp=usage.stopped_at_clamp,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens, call_s=usage.latency_s, harness_s=harness)


def trained_cost(metrics: Mapping[str, Any], trainer_s: float, publish_s: float) -> Cost:
    """A step's update: the tokens it trained (summed over ``[policies]``) and the seconds it took."""
    return Cost(tokens_trained=int(summed(metrics, "tokens/trained")), trainer_s=trainer_s, publish_s=publish_s)


class ProcessMeter:
    """This process's share of each record: the engine's busy seconds and CPU seconds since the previous
    reading, and the peak resident memory so far. Readings start at the process's (and engine's) start."""

    def __init__(self, engine: Any = None) -> None:
        self.engine = engine  # the embedded engine (its ``busy_s``), or None for engine URLs
        self._last = (0.0, 0.0, 0.0)

    def take(self) -> Cost:
        busy = getattr(self.engine, "busy_s", None) if self.engine is not None else None
        me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        now = (float(busy or 0.0), me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime)
        engine, cpu, children_cpu = (a - b for a, b in zip(now, self._last, strict=True))
        self._last = now
        return Cost(engine_busy_s=None if busy is None else engine, cpu_s=cpu, children_cpu_s=children_cpu,
                    peak_rss_bytes=peak_rss_bytes())


def run_cost(events: Iterable[Mapping[str, Any]]) -> RunCost | None:
    """The ``cost`` records of a run's step and evaluation events summed; None when none has one."""
    train, held_out, steps, success_at, seen = Cost(), Cost(), 0, None, False
    for e in events:
        record = e.get("cost")
        if not isinstance(record, dict) or e.get("event") not in ("step", "sft_step", "eval"):
            continue
        seen = True
        if e["event"] == "eval":
            held_out += Cost.from_record(record)
            continue
        steps += 1
        train += Cost.from_record(record)
        threshold = record.get("success_at")
        if isinstance(threshold, int | float) and not isinstance(threshold, bool):
            success_at = float(threshold)
    return RunCost(steps, train, held_out, success_at) if seen else None


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of ``events.jsonl`` (a line cut short by a kill skipped)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def record_run_cost(run_dir: Path) -> RunCost | None:
    """At a run's end: sum its records (every invocation's, after a resume) into a ``cost`` event."""
    events = run_dir / "events.jsonl"
    cost = run_cost(read_events(events))
    if cost is not None:
        cut = not events.read_bytes().endswith(b"\n")  # a line cut short by a kill: ours starts a new one
        with events.open("a", encoding="utf-8") as f:
            f.write(("\n" if cut else "") + json.dumps({"event": "cost", "time": time.time(), **cost.record()}) + "\n")
    return cost


# -- how it reads ---------------------------------------------------------------------------------------
def gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.2f} GiB"


def secs(s: float | None) -> str:
    return "n/a" if s is None else f"{s:,.0f}s" if s >= 10 else f"{s:.1f}s"


def per_success(cost: RunCost) -> str:
    """Cost per successful training attempt, or why there is none."""
    t, bar = cost.train, f"reward >= {cost.success_at:g}" if cost.success_at is not None else "success"
    if not t.attempts:
        return "per successful training attempt: n/a (no training attempt recorded)"
    if not t.successes:
        return f"per successful training attempt: n/a (none of {t.attempts:,} reached {bar})"
    n = t.successes
    return (f"per successful training attempt ({bar}: {n:,} of {t.attempts:,}): {t.calls / n:,.1f} calls, "
            f"{t.prompt_tokens / n:,.0f} prompt + {t.completion_tokens / n:,.0f} completion tokens, "
            f"harness {secs(t.harness_s / n)}")


def cost_lines(cost: RunCost) -> list[str]:
    """The lines a run's end prints: the totals, the cost per successful training attempt, and a third line
    only when calls were refused or had their max_tokens lowered (what a harness did not choose)."""
    t = cost.total
    odd = []
    if t.refused_calls:
        odd.append(f"{t.refused_calls:,} calls refused (harnessrl show ROLLOUT says why)")
    if t.clamped_calls:
        odd.append(f"{t.clamped_calls:,} calls served less max_tokens than asked, {t.stopped_at_clamp:,} of "
                   "them stopped there")
    return [
        f"cost: {t.calls:,} model calls ({cost.train.calls:,} training, {cost.held_out.calls:,} held-out), "
        f"{t.prompt_tokens:,} prompt + {t.completion_tokens:,} completion tokens, {t.tokens_trained:,} trained | "
        f"engine busy {secs(t.engine_busy_s)} (call latencies {secs(t.call_s)}), trainer {secs(t.trainer_s)}, "
        f"harness {secs(t.harness_s)}, publish {secs(t.publish_s)} | CPU {secs(t.cpu_s)} "
        f"(+{secs(t.children_cpu_s)} harnesses, verifiers) | peak RSS {gib(t.peak_rss_bytes)}",
        per_success(cost),
    ] + ([f"calls: {'; '.join(odd)}"] if odd else [])
