"""The trainer's metrics in labelled groups, in the order a reader wants them, and rounding noise as 0.

``metrics.jsonl`` holds 40-odd names per step; alphabetical order puts ``advantage/max`` first. Here each
name falls into the first group whose rule matches it (``policy/<name>/...`` into one group per policy),
and a name no rule knows lands in "other", so a new metric is never hidden.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Below this magnitude a value is float noise (a mean of advantages that sum to zero: 1e-17), shown as 0.
NOISE = 1e-9


def denoise(v: float) -> float:
    """``v``, or 0.0 when ``|v| < NOISE``."""
    return 0.0 if abs(v) < NOISE else v


@dataclass(frozen=True)
class GroupRule:
    key: str
    label: str
    pattern: re.Pattern[str]


def _rule(key: str, label: str, *patterns: str) -> GroupRule:
    return GroupRule(key, label, re.compile("|".join(f"(?:{p})" for p in patterns)))


#: In display order. Counts are ``count/<what>`` (``harnessrl.training`` and the controller's step stats).
RULES: tuple[GroupRule, ...] = (
    _rule("rewards", "Rollouts and rewards",
          r"reward/", r"samples/rollouts$", r"count/(rollouts|replay|rft|baseline|sessions)[._]"),
    _rule("exploration", "Exploration and groups",
          r"advantage/", r"entropy$", r"count/(groups|dynamic|explore)\."),
    _rule("training", "Training and loss",
          r"loss$", r"clip_fraction$", r"approx_kl$", r"ref_kl$", r"ratio_mean$", r"is_weight_mean$",
          r"grad_norm", r"lr$", r"updates$", r"skipped$", r"micro_batches$", r"policy_version$",
          r"tokens/", r"samples/(count|per_rollout)$", r"time/", r"throughput/", r"memory/",
          r"count/(overflow|distill|sft)\."),
    _rule("gateway", "Gateway and engine",
          r"samples/", r"count/(calls|excluded|redacted|skipped)\.", r"count/(tokens|boundary)_changed$"),
)
POLICY = re.compile(r"policy/(?P<name>[^/]+)/")


@dataclass
class MetricGroup:
    key: str
    label: str
    names: list[str] = field(default_factory=list)


def group_metrics(names: Iterable[str]) -> list[MetricGroup]:
    """``names`` in groups (display order; empty groups dropped), each keeping the names' given order."""
    groups = {r.key: MetricGroup(r.key, r.label) for r in RULES}
    policies: dict[str, MetricGroup] = {}
    other = MetricGroup("other", "Other")
    for name in names:
        if m := POLICY.match(name):
            policy = m["name"]
            policies.setdefault(policy, MetricGroup(f"policy-{policy}", f"Policy {policy}")).names.append(name)
        elif name.startswith("policies/"):
            policies.setdefault("", MetricGroup("policies", "Policies")).names.append(name)
        else:
            rule = next((r for r in RULES if r.pattern.match(name)), None)
            (groups[rule.key] if rule else other).names.append(name)
    ordered: Sequence[MetricGroup] = [*groups.values(), *(policies[k] for k in sorted(policies)), other]
    return [g for g in ordered if g.names]
