"""Per-rollout report of a run: model calls, how each call's prompt relates to the earlier ones, rewards.

``python examples/swe/fidelity.py runs/swe/store.db [RUN_ID]`` (default: the latest run in the store).
A call is ``exact``/``extended`` when its prompt starts with an earlier call's prompt+completion token for
token (the trainer can merge them into one sequence), ``rerendered`` when it does not (the first call of a
rollout always is). ``harnessrl collect`` prints only the mean reward; this adds what a harness author
checks first: did every call of the harness get recorded with tokens, and did the history stay exact.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

from harnessrl.store import Store, open_store


@dataclass
class RunReport:
    run_id: str
    rollouts: int = 0
    calls: int = 0
    calls_with_tokens: int = 0
    fidelity: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    rewards: list[float] = field(default_factory=list)
    tampered: int = 0
    calls_per_rollout: list[int] = field(default_factory=list)

    def lines(self) -> list[str]:
        n = max(1, len(self.calls_per_rollout))
        mean_reward = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        return [
            f"run {self.run_id}: {self.rollouts} rollouts ({dict(self.statuses)})",
            f"calls: {self.calls} ({sum(self.calls_per_rollout) / n:.1f} per rollout, "
            f"min {min(self.calls_per_rollout, default=0)}, max {max(self.calls_per_rollout, default=0)}), "
            f"with token ids: {self.calls_with_tokens}",
            "fidelity: " + ", ".join(f"{k} {self.fidelity.get(k, 0)}" for k in ("exact", "extended", "rerendered"))
            + (f", unknown {self.fidelity['none']}" if self.fidelity.get("none") else ""),
            f"final reward: mean {mean_reward:.3f} over {len(self.rewards)} rollouts; tampered {self.tampered}",
        ]


def report(store: Store, run_id: str) -> RunReport:
    out = RunReport(run_id)
    for rollout in store.list_rollouts(run_id=run_id, limit=100_000):
        out.rollouts += 1
        out.statuses[rollout.status.value] += 1
        calls = store.get_calls(rollout.id)
        out.calls += len(calls)
        out.calls_per_rollout.append(len(calls))
        for c in calls:
            out.calls_with_tokens += bool(c.prompt_token_ids and c.completion_token_ids)
            out.fidelity[c.fidelity.value if c.fidelity else "none"] += 1
        names = {r.name: r.value for r in store.get_rewards(rollout.id)}
        if "final" in names:
            out.rewards.append(names["final"])
        out.tampered += "tamper" in names
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    url = argv[0] if "://" in argv[0] else f"sqlite:///{argv[0]}"
    store = open_store(url)
    try:
        runs = sorted(store.list_runs(), key=lambda r: r.created_at)
        if not runs:
            print("no runs in the store", file=sys.stderr)
            return 1
        run_id = argv[1] if len(argv) > 1 else runs[-1].id
        print("\n".join(report(store, run_id).lines()))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
