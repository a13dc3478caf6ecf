"""Training sees a harness's own posts only where the policy says so (``[rewards] posted``)."""

from __future__ import annotations

from harnessrl.rewards.posted import posts_are_trained, trained_rewards
from harnessrl.training.config import TrainingConfig
from harnessrl.training.train_batch import prepare_batch
from harnessrl.types import Reward, Rollout, RolloutStatus


def _rollout(rid: str) -> Rollout:
    return Rollout(id=rid, run_id=None, task_id="t", group_id="g", input={}, status=RolloutStatus.SUCCEEDED,
                   policy_version=0)


def _rewards(rid: str, posted: float, verifier: float, *, marked: bool) -> list[Reward]:
    out = [Reward(rid, posted, "reward", None, 1.0), Reward(rid, posted, "reward", 0, 1.5),
           Reward(rid, verifier, "verifier", None, 2.0)]
    if marked:
        out.append(Reward(rid, 0.0, "posted", None, 3.0))
    return [*out, Reward(rid, verifier, "final", None, 4.0)]


def test_policy() -> None:
    assert posts_are_trained("auto", has_verifier=False) and not posts_are_trained("auto", has_verifier=True)
    assert posts_are_trained("train", has_verifier=True) and not posts_are_trained("record", has_verifier=False)


def test_a_rollout_that_posted_itself_one_trains_on_its_verifier_only() -> None:
    cheat, honest = _rewards("cheat", 1.0, 0.0, marked=True), _rewards("honest", 0.0, 1.0, marked=True)
    items = [(_rollout("cheat"), [], cheat), (_rollout("honest"), [], honest)]
    assert prepare_batch(items, TrainingConfig()).rewards == {"cheat": 0.0, "honest": 1.0}
    # naming the harness's reward, or per-call returns, finds nothing of the marked rollouts
    named = prepare_batch(items, TrainingConfig(reward_name="reward"))
    assert named.rewards == {} and named.counts["rollouts.no_reward"] == 2
    assert all(r.call_index is None for r in trained_rewards(cheat))


def test_a_forged_mark_is_superseded_and_unmarked_rollouts_are_untouched() -> None:
    cheat = _rewards("cheat", 1.0, 0.0, marked=True)
    forged = [Reward("cheat", 1.0, "posted", None, 0.5), *cheat]  # posted before scoring marked it
    assert {r.name for r in trained_rewards(forged)} == {"verifier", "posted", "final"}
    plain = _rewards("p", 1.0, 0.0, marked=False)
    assert trained_rewards(plain) == plain
