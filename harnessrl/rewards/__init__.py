"""Rewards: from the harness (posted to its reward URL), its exit code, a verifier run after it exits, or a
judge model reading the recorded transcript against a rubric (``judge.py``, docs/judges.md).

``score_attempt(spec, result, store, config)`` writes a rollout's rewards and returns a ``RewardOutcome``
with the final scalar and how to close the rollout. See ``score.py`` for the order of decisions.
"""

from harnessrl.rewards.config import RewardConfig
from harnessrl.rewards.score import (
    EXIT_CODE,
    FINAL,
    RESERVED_NAMES,
    TAMPER,
    VERIFIER,
    RewardOutcome,
    close_rollout,
    score_attempt,
)
from harnessrl.rewards.verifier import VerifierError, parse_reward

__all__ = [
    "EXIT_CODE",
    "FINAL",
    "RESERVED_NAMES",
    "TAMPER",
    "VERIFIER",
    "RewardConfig",
    "RewardOutcome",
    "VerifierError",
    "close_rollout",
    "parse_reward",
    "score_attempt",
]
