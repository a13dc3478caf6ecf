"""Which rewards training may use: the harness's own posts are evidence only where nothing better decides.

A harness posts rewards to ``HARNESSRL_REWARD_URL`` with its rollout's key, and so can every tool it runs
(mini-swe-agent's bash inherits the variables): a model can post itself 1.0. With a verifier configured the
verifier decides; the posts are then recorded (the dashboard shows them) but not trained, unless
``[rewards] posted = "train"``. Scoring leaves a ``posted`` reward of 0.0 on such a rollout and
``trained_rewards`` drops the harness's names and per-call rewards from what the trainer sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl.types import FINAL_REWARD, Reward

#: Written by scoring on a rollout whose harness posts are recorded only (0.0).
POSTED = "posted"
#: Names only harnessrl's scoring writes; a harness posting one of them is ignored by scoring.
SCORING_NAMES = frozenset({FINAL_REWARD, "verifier", "judge", "exit_code", "tamper", POSTED})


def posts_are_trained(policy: str, has_verifier: bool) -> bool:
    """``auto``: trained unless a verifier (or a judge) decides; ``train``/``record``: as said."""
    return policy == "train" or (policy == "auto" and not has_verifier)


def trained_rewards(rewards: Sequence[Reward]) -> list[Reward]:
    """The rewards training may use: all, unless scoring marked the harness's posts as recorded only."""
    marks = [r for r in rewards if r.name == POSTED and r.call_index is None]
    if marks and max(marks, key=lambda r: r.created_at).value == 0.0:
        return [r for r in rewards if r.name in SCORING_NAMES and r.call_index is None]
    return list(rewards)
