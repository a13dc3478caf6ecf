"""Harbor's reward file, read as Harbor reads it: the contract every in-container grader shares.

``tests/test.sh`` writes ``/logs/verifier/reward.json`` (an object of numbers: its ``reward`` key, else its only
number) or ``reward.txt`` (one number); json first. Read on the host after the tests ran on it
(``harbor/verify.py``), copied out of a container (``rewards/container_grading.py``) or from a Kubernetes
verifier's log (``runners/k8s_grade.py``). Stdlib only: the host verifier imports it inside the sandbox.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


class RewardFileError(Exception):
    """``test.sh`` left no reward, or one that is not a number."""


def read_reward(verifier_dir: Path) -> tuple[float, dict[str, float]]:
    """(the reward, every number of reward.json) from what test.sh wrote, by Harbor's rules."""
    text_file, json_file = verifier_dir / "reward.txt", verifier_dir / "reward.json"
    numbers: dict[str, float] = {}
    if json_file.is_file():
        try:
            parsed = json.loads(json_file.read_text())
        except ValueError as exc:
            raise RewardFileError(f"/logs/verifier/reward.json is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise RewardFileError("/logs/verifier/reward.json must be an object, e.g. {\"reward\": 1.0}")
        numbers = {str(k): float(v) for k, v in parsed.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        if "reward" in numbers:
            return _finite(numbers["reward"]), numbers
        if len(numbers) == 1 and not text_file.is_file():
            return _finite(next(iter(numbers.values()))), numbers
        if not text_file.is_file():
            raise RewardFileError(f"/logs/verifier/reward.json has no \"reward\" key (numbers: {sorted(numbers)}) "
                                  "and there is no reward.txt")
    if not text_file.is_file():
        raise RewardFileError("tests/test.sh wrote no reward: expected /logs/verifier/reward.txt (a number) or "
                              "/logs/verifier/reward.json")
    text = text_file.read_text().strip()
    try:
        return _finite(float(text)), numbers
    except ValueError:
        raise RewardFileError(f"/logs/verifier/reward.txt is not a number: {text[:200]!r}") from None


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise RewardFileError(f"the reward is {value}; it must be a finite number")
    return value
