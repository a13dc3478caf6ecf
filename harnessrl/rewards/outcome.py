"""A rollout's outcome reward: the one number that training, the controller, the tables and exports use.

The rule, in order:

1. ``reward_name`` given: the latest rollout-level reward of that name (how ``[training] reward_name``
   trains on one named reward).
2. A ``final`` reward (scoring's combination of the sources, recorded beside them under their own names):
   its latest value. Summing it with its own sources would count them twice.
3. Otherwise (no scoring ran: a gateway used alone, where the harness posts rewards), the sum over names
   of each name's latest value: two different posted rewards both count, a re-post replaces its name.

Per-call rewards (``call_index`` set) are not outcome rewards. None when nothing applies, so a missing
reward is never mistaken for 0. Which rewards training may see at all (``[rewards] posted``) is decided
before this, by ``rewards.posted.trained_rewards``.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl.types import FINAL_REWARD, Reward


def rollout_reward(rewards: Sequence[Reward], reward_name: str | None = None) -> float | None:
    """The rollout's outcome reward by the rule above, or None."""
    whole = [r for r in rewards if r.call_index is None]
    if reward_name is None and any(r.name == FINAL_REWARD for r in whole):
        reward_name = FINAL_REWARD
    latest: dict[str, Reward] = {}
    for r in sorted(whole, key=lambda r: r.created_at):
        if reward_name is None or r.name == reward_name:
            latest[r.name] = r
    if not latest:
        return None
    return float(sum(r.value for r in latest.values()))
