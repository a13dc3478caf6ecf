"""The canary's statistics: which sessions join the candidate's arm, and the rule that promotes, rolls back
or holds from the decided outcomes of both arms (``canary.py`` acts on it; docs/production.md).

- **Arms.** A new session joins the canary arm when a digest of (deployment, candidate version, session
  id) falls under ``fraction``: stable for a session, independent of which sessions are recorded, and a
  different subset for each candidate.
- **The rule** (``decide``): once both arms have ``min_sessions`` sessions with a decided outcome since the
  start, promote when candidate mean >= stable mean - ``max_regression``, else roll back; hold before.
  With ``confidence`` set, the difference of the means must clear that margin at that one-sided confidence
  (normal approximation, each arm's own variance) either way before it decides, and it holds otherwise,
  up to ``max_sessions`` per arm, where the plain comparison decides: noisy signals (thumbs) need it.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import dataclass

from harnessrl.production.config import CanaryConfig
from harnessrl.store.canary import ArmStats

#: Means closer than this are equal (a tie at exactly ``max_regression`` promotes).
_TIE = 1e-9


@dataclass(frozen=True, slots=True)
class Verdict:
    action: str  # hold | promote | rollback
    reason: str


def decide(stable: ArmStats | None, candidate: ArmStats | None, config: CanaryConfig) -> Verdict:
    """Promote, roll back or hold, from the decided sessions of each arm since the canary started."""
    need = config.min_sessions
    s_n = stable.decided if stable else 0
    c_n = candidate.decided if candidate else 0
    if s_n < need or c_n < need:
        return Verdict("hold", f"waiting for {need} decided sessions per arm: stable {s_n}, candidate {c_n}")
    assert stable is not None and candidate is not None and stable.mean is not None and candidate.mean is not None
    floor = stable.mean - config.max_regression
    detail = (f"candidate mean {candidate.mean:.4f} ({c_n} sessions) vs stable {stable.mean:.4f} ({s_n}); "
              f"max regression {config.max_regression:g}")
    if config.confidence is not None:
        verdict = _with_confidence(stable, candidate, config, detail)
        if verdict is not None:
            return verdict
    if candidate.mean >= floor - _TIE:
        return Verdict("promote", f"{detail}: within it")
    return Verdict("rollback", f"{detail}: trails by {stable.mean - candidate.mean:.4f}")


def _with_confidence(stable: ArmStats, candidate: ArmStats, config: CanaryConfig, detail: str) -> Verdict | None:
    """The interval rule: promote when the one-sided lower bound of (candidate - stable) is at least
    ``-max_regression``, roll back when the upper bound is below it, hold in between; None (the plain
    comparison decides) once both arms reached ``max_sessions``."""
    assert config.confidence is not None and stable.mean is not None and candidate.mean is not None
    cap = config.decide_by_mean_at
    if stable.decided >= cap and candidate.decided >= cap:
        return None
    s_var, c_var = stable.variance, candidate.variance
    if s_var is None or c_var is None:  # evidence without the second moment: nothing to bound
        return Verdict("hold", f"{detail}: no outcome variance recorded for an arm yet")
    z = statistics.NormalDist().inv_cdf(config.confidence)
    diff = candidate.mean - stable.mean
    se = math.sqrt(s_var / stable.decided + c_var / candidate.decided)
    low, high = diff - z * se, diff + z * se
    bounds = f"difference {diff:+.4f}, {config.confidence:g}-confidence bounds [{low:+.4f}, {high:+.4f}]"
    if low >= -config.max_regression - _TIE:
        return Verdict("promote", f"{detail}: {bounds}, within it")
    if high < -config.max_regression - _TIE:
        return Verdict("rollback", f"{detail}: {bounds}, trails by more")
    return Verdict("hold", f"{detail}: {bounds}, not decided yet (the means decide at {cap} sessions per arm)")


def in_canary(deployment: str, candidate_version: int, session_id: str, fraction: float) -> bool:
    """Whether a new session joins the candidate's arm: a digest of the session id, salted with the
    deployment and candidate version, read as a number in [0, 1)."""
    digest = hashlib.blake2b(f"canary:{deployment}:{candidate_version}:{session_id}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") / 2**64 < fraction
