"""The trainer's metrics in labelled groups, in the order a reader wants them, and rounding noise as 0.

``metrics.jsonl`` holds 40-odd names per step; alphabetical order puts ``advantage/max`` first. Here each
name falls into the first group whose rule matches it (``policy/<name>/...`` into one group per policy),
and a name no rule knows lands in "other", so a new metric is never hidden. Within a group the names
follow the rule (``reward/mean`` before the counts, ``loss`` before the token counts).
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
    patterns: tuple[re.Pattern[str], ...]  # in the order their names are shown

    def rank(self, name: str) -> int | None:
        """The index of the first pattern matching ``name`` (None: not in this group)."""
        return next((i for i, p in enumerate(self.patterns) if p.match(name)), None)


def _rule(key: str, label: str, *patterns: str) -> GroupRule:
    return GroupRule(key, label, tuple(re.compile(p) for p in patterns))


#: In display order. Counts are ``count/<what>`` (``harnessrl.training`` and the controller's step stats).
RULES: tuple[GroupRule, ...] = (
    _rule("rewards", "Rollouts and rewards",
          r"reward/", r"samples/rollouts$", r"count/rollouts[._]", r"count/(replay|rft|baseline|sessions)\."),
    _rule("exploration", "Exploration and groups",
          r"count/groups\.", r"advantage/", r"entropy$", r"count/dynamic\.", r"count/explore\."),
    _rule("training", "Training and loss",
          r"loss$", r"clip_fraction$", r"approx_kl$", r"ref_kl$", r"ratio_mean$", r"is_weight_mean$",
          r"grad_norm", r"lr$", r"updates$", r"skipped$", r"policy_version$", r"samples/(count|per_rollout)$",
          r"tokens/", r"micro_batches$", r"time/", r"throughput/", r"memory/", r"count/(overflow|distill|sft)\."),
    _rule("gateway", "Gateway and engine",
          r"samples/", r"count/(fidelity|render|calls)\.", r"count/(excluded|redacted|skipped)\.",
          r"count/(tokens|boundary)_changed$"),
)
POLICY = re.compile(r"policy/(?P<name>[^/]+)/")


@dataclass
class MetricGroup:
    key: str
    label: str
    names: list[str] = field(default_factory=list)


def group_metrics(names: Iterable[str]) -> list[MetricGroup]:
    """``names`` in groups (display order; empty groups dropped); within a group in its rule's order, then
    in the order given."""
    ranked: dict[str, list[tuple[int, int, str]]] = {r.key: [] for r in RULES}
    policies: dict[str, MetricGroup] = {}
    other = MetricGroup("other", "Other")
    for pos, name in enumerate(names):
        if m := POLICY.match(name):
            policy = m["name"]
            policies.setdefault(policy, MetricGroup(f"policy-{policy}", f"Policy {policy}")).names.append(name)
        elif name.startswith("policies/"):
            policies.setdefault("", MetricGroup("policies", "Policies")).names.append(name)
        else:
            hit = next(((r, rank) for r in RULES if (rank := r.rank(name)) is not None), None)
            if hit is None:
                other.names.append(name)
            else:
                ranked[hit[0].key].append((hit[1], pos, name))
    groups = [MetricGroup(r.key, r.label, [n for *_, n in sorted(ranked[r.key])]) for r in RULES]
    ordered: Sequence[MetricGroup] = [*groups, *(policies[k] for k in sorted(policies)), other]
    return [g for g in ordered if g.names]
