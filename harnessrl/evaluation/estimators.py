"""pass@k and bootstrap intervals over tasks: the statistics an eval's figures are read with.

pass@k is the unbiased estimator of Chen et al. (2021): with ``n`` attempts of a task of which ``c`` succeeded,
the chance that ``k`` drawn without replacement hold at least one success, ``1 - C(n-c, k) / C(n, k)``,
averaged over tasks. Intervals resample tasks, not attempts: tasks are what a benchmark draws, and a task's
attempts are not independent of each other.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one task: ``n`` attempts, ``c`` of them successes."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: {c} successes out of {n} attempts")
    if k < 1 or k > n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n attempts (n = {n})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Interval:
    """An estimate with its bootstrap interval (``low``, ``high``) at ``level``."""

    value: float
    low: float
    high: float
    level: float = 0.95

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "n/a"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap(values: Sequence[float], *, statistic: Callable[[Sequence[float]], float] = statistics.fmean,
              resamples: int = 2000, level: float = 0.95, seed: int = 0) -> Interval:
    """``statistic`` of ``values`` (one per task) with a percentile bootstrap interval over them.

    Seeded: the same attempts print the same interval on every rerun of a report. One value: its interval is
    the value itself (nothing to resample). None: not a number.
    """
    if not values:
        return Interval(math.nan, math.nan, math.nan, level)
    point = statistic(values)
    if len(values) == 1:
        return Interval(point, point, point, level)
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1.0 - level) / 2
    low = stats[min(resamples - 1, int(math.floor(tail * resamples)))]
    high = stats[min(resamples - 1, int(math.ceil((1.0 - tail) * resamples)) - 1)]
    return Interval(point, low, high, level)


def paired_difference(a: dict[str, float], b: dict[str, float], *, resamples: int = 2000, level: float = 0.95,
                      seed: int = 0) -> tuple[Interval, int]:
    """Mean of ``a[t] - b[t]`` over the tasks both scored, with its bootstrap interval, and that task count.

    Pairing by task removes the tasks' own difficulty from the comparison, which is most of the variance.
    """
    both = sorted(set(a) & set(b))
    diffs = [a[t] - b[t] for t in both]
    return bootstrap(diffs, resamples=resamples, level=level, seed=seed), len(both)
