"""One rule for a rollout's outcome reward (``harnessrl.rewards.outcome``), and every reader uses it.

Before, the controller read ``final`` only, training summed the latest value per name and the tables
showed the last reward: on a rollout without ``final`` they gave None, 0.75 and 0.5 for the same data.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harnessrl.controller import Controller
from harnessrl.export import sample_records
from harnessrl.inspection.rollout_pages import Filters, rollout_page
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import Store, open_store
from harnessrl.store.base import NewCall
from harnessrl.training.config import TrainingConfig
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import FINAL_REWARD, ApiKind, CallStatus, ChoiceTokens, Reward, RolloutStatus


def test_the_rule() -> None:
    rs = [Reward("a", 1.0, "correct", created_at=1), Reward("a", 0.5, "format", created_at=2),
          Reward("a", 3.0, "correct", created_at=3), Reward("a", 9.0, "step", call_index=0)]
    assert rollout_reward(rs) == 3.5  # latest per name, summed; per-call rewards are not outcomes
    assert rollout_reward(rs, "format") == 0.5
    assert rollout_reward(rs, "missing") is None and rollout_reward([]) is None
    assert rollout_reward(rs[3:]) is None  # only a per-call reward: no outcome, not 0


def test_scorings_final_reward_is_not_summed_with_its_own_sources() -> None:
    """Scoring records each source and their combination ``final``; the outcome is ``final`` alone."""
    rs = [Reward("a", 1.0, "exit_code", created_at=1), Reward("a", 0.25, "verifier", created_at=2),
          Reward("a", 0.25, FINAL_REWARD, created_at=3), Reward("a", 0.75, FINAL_REWARD, call_index=1)]
    assert rollout_reward(rs) == 0.25
    assert rollout_reward(rs, "exit_code") == 1.0  # a named reward still wins


def _rollout(store: Store, run_id: str, rid: str, rewards: list[tuple[str, float, int | None]]) -> None:
    store.create_rollout(task_id=rid, input={}, group_id="g", api_key_hash="h", run_id=run_id, step=1,
                         metadata={"split": "train"}, rollout_id=rid)
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.record_calls([NewCall(rid, ApiKind.CHAT, CallStatus.OK, {"messages": [{"role": "user", "content": "q"}]},
                                {"choices": [{"message": {"role": "assistant", "content": "a"}}]},
                                [1, 2, 3], [ChoiceTokens([4, 5], [-0.5, -0.25], "stop")], 3)])
    for name, value, call_index in rewards:
        store.add_reward(rid, value, name, call_index=call_index)
    store.transition_rollout(rid, RolloutStatus.SUCCEEDED)


@pytest.mark.parametrize(("rewards", "expected"), [
    # no `final` (a gateway used without scoring): a re-post replaces its name, names add up
    ([("correct", 1.0, None), ("correct", 0.25, None), ("format", 0.5, None), ("step", 9.0, 0)], 0.75),
    ([("verifier", 1.0, None), (FINAL_REWARD, 0.5, None), ("judge", 0.25, None)], 0.5),
    ([("step", 9.0, 0)], None),
])
def test_controller_training_tables_and_export_agree(tmp_path: Path, rewards: list, expected: float | None
                                                     ) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    run = store.create_run("r", {})
    _rollout(store, run.id, "r0", rewards)
    rollout = store.get_rollout("r0")

    controller = Controller.rewards_of(SimpleNamespace(store=store), [rollout])["r0"]  # type: ignore[arg-type]
    training = batch_from_store(store, [rollout], TrainingConfig()).rewards.get("r0")
    (row,), _ = rollout_page(store, Filters(run=run.id))
    (record,) = sample_records(store, run_id=run.id)
    assert controller == training == row.reward == record["reward"] == expected
    store.close()
