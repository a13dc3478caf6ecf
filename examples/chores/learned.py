"""What the policy learned, read from the calls a run recorded: per held-out evaluation and per training step,
the attempts solved, the calls mini could parse (exactly one ```bash block), and the commands written.

``python examples/chores/learned.py runs/chores`` (a run directory, its store.db, or a store URL).
A command is shown without its comment lines and with the task's name replaced by NAME, so ``mkdir logs``
and ``mkdir docs`` count as one.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass, field

from harnessrl.entrypoints.common import store_url
from harnessrl.store import Store, open_store

ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.S)  # mini.yaml's action_regex


@dataclass
class Phase:
    """One evaluation (``eval vN``) or one training step (``step N``)."""

    name: str
    attempts: int = 0
    solved: int = 0
    calls: int = 0
    parsed: int = 0
    commands: Counter = field(default_factory=Counter)

    def line(self, top: int) -> str:
        common = ", ".join(f"{cmd!r} {n}" for cmd, n in self.commands.most_common(top))
        return (f"{self.name:>8}: solved {self.solved}/{self.attempts} | calls parsed {self.parsed}/{self.calls}"
                f" | commands: {common}")


def _content(response: dict | None) -> str:
    try:
        return (response or {})["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        return ""


def phases(store: Store, run_id: str | None = None) -> list[Phase]:
    """Every evaluation and training step of the run (the latest run in the store if ``run_id`` is None)."""
    if run_id is None:
        runs = store.list_runs()
        if not runs:
            return []
        run_id = max(runs, key=lambda run: run.created_at).id
    out: dict[tuple[int, int], Phase] = {}  # keyed by order: the untrained evaluation, the steps, later evaluations
    for r in store.iter_rollouts(run_id=run_id):
        if r.step is None:
            order, name = (0 if r.policy_version == 0 else 2, r.policy_version), f"eval v{r.policy_version}"
        else:
            order, name = (1, r.step), f"step {r.step}"
        phase = out.setdefault(order, Phase(name))
        rewards = {x.name: x.value for x in store.get_rewards(r.id)}
        if "final" not in rewards:
            continue  # failed for infrastructure reasons: not an attempt of the policy
        phase.attempts += 1
        phase.solved += rewards["final"] >= 1.0
        target = re.search(r"(?:named|file|directory) (\S+?)[ .](?:in|from|and)", str((r.input or {}).get("issue", "")))
        for call in store.get_calls(r.id):
            phase.calls += 1
            actions = ACTION.findall(_content(call.response))
            if len(actions) != 1:
                continue
            phase.parsed += 1
            lines = [" ".join(x.split()) for x in actions[0].splitlines() if x.strip()]
            command = "; ".join(x for x in lines if not x.startswith("#")) or "(comments only)"
            if target:
                command = command.replace(target.group(1), "NAME")
            phase.commands[command[:60]] += 1
    return [out[order] for order in sorted(out)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="a run directory, its store.db, or a store URL")
    parser.add_argument("--run", help="run id (default: the latest run in the store)")
    parser.add_argument("--top", type=int, default=4, help="commands shown per phase")
    args = parser.parse_args()
    store = open_store(store_url(args.db))
    try:
        for phase in phases(store, args.run):
            print(phase.line(args.top))
    finally:
        store.close()


if __name__ == "__main__":
    main()
