"""Success replay (``[training] replay_best``): which past attempts are replayed, with what advantage, at
what ratio; and the controller's pool read back from the real store (SQLite), as after a resume."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harnessrl.config import HarnessConfig
from harnessrl.controller import Controller
from harnessrl.store import NewCall, open_store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.losses import policy_loss
from harnessrl.training.replay import PastAttempt, choose_replays
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, RolloutStatus

pytest.importorskip("harnessrl.store.sqlite")


def test_only_attempts_above_every_reward_of_the_step_are_replayed_best_and_latest_first() -> None:
    past = [PastAttempt("a", 1, 1.0), PastAttempt("b", 2, 1.0), PastAttempt("c", 2, 0.25), PastAttempt("d", 1, 0.5)]
    chosen = choose_replays(past, [0.25, 0.0, 0.0, 0.0], k=2, estimator="dr_grpo")
    assert [(p.rollout_id, adv) for p, adv in chosen] == [("b", 0.9375), ("a", 0.9375)]
    # k = 3 adds the 0.5 (above the step's best 0.25), never the 0.25 (not above it)
    assert [p.rollout_id for p, _ in choose_replays(past, [0.25, 0.0], k=3, estimator="dr_grpo")] == ["b", "a", "d"]
    # once the policy reaches the reward itself, nothing is replayed
    assert choose_replays(past, [1.0, 0.0, 0.25], k=4, estimator="dr_grpo") == []
    assert choose_replays(past, [], k=4, estimator="dr_grpo") == []  # nothing scored: nothing to beat
    assert choose_replays(past, [0.0], k=0, estimator="dr_grpo") == []


def test_grpo_scales_a_replay_by_the_step_std_and_by_1_when_the_step_did_not_vary() -> None:
    past = [PastAttempt("a", 1, 1.0)]
    step = [0.25, 0.0, 0.0, 0.0]
    (_, adv), = choose_replays(past, step, k=1, estimator="grpo")
    assert adv == pytest.approx((1.0 - 0.0625) / 0.125)  # sample std of the step's rewards: 0.125
    (_, flat), = choose_replays(past, [0.25, 0.25], k=1, estimator="grpo")
    assert flat == pytest.approx(0.75)


def test_a_nan_behaviour_logprob_is_taken_at_ratio_1_against_the_current_policy() -> None:
    logp = torch.tensor([-2.0, -0.5, -3.0], requires_grad=True)
    adv, w = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.2, 0.3, 0.5])
    # -3.0 was sampled long ago at -0.1: against that the ratio is e^-2.9, which clips nothing but scales
    # the gradient away; as a replay it counts at ratio 1
    stale = torch.tensor([-2.0, -0.5, -0.1])
    replay = torch.tensor([-2.0, -0.5, math.nan])
    out = policy_loss(logp, replay, adv, w)
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert torch.isfinite(out.loss) and grad.tolist() == pytest.approx([-0.2, -0.3, -0.5])
    assert out.ratio == pytest.approx(3.0) and out.approx_kl == pytest.approx(0.0) and out.clipped == 0
    (stale_grad,) = torch.autograd.grad(policy_loss(logp, stale, adv, w).loss, logp)
    assert stale_grad[2] == pytest.approx(-0.5 * math.exp(-2.9))
    # several updates with truncated IS: the reference is the trainer's "old" logprob, weight 1
    old = torch.tensor([-2.0, -0.5, -2.5])
    out = policy_loss(logp, replay, adv, w, tis_cap=2.0, old_logp=old)
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert grad[2] == pytest.approx(-0.5 * math.exp(-3.0 + 2.5)) and out.is_weight == pytest.approx(3.0)


def _call(rid: str, prompt: list[int], completion: list[int]) -> NewCall:
    return NewCall(rollout_id=rid, api=ApiKind.CHAT, status=CallStatus.OK, request={"messages": []}, response=None,
                   prompt_token_ids=prompt, choices=[ChoiceTokens(completion, [-0.7] * len(completion))],
                   policy_version=0)


def _step(store, run_id: str, step: int, rewards: list[float]) -> list[str]:
    ids = []
    for i, value in enumerate(rewards):
        rid = store.create_rollout(task_id=f"t{step}", input={}, group_id=f"s{step}", api_key_hash=f"h{step}{i}",
                                   run_id=run_id, step=step).id
        store.record_calls([_call(rid, [1, 2, 3], [10 + step, 20 + i])])
        store.add_reward(rid, value)
        store.transition_rollout(rid, RolloutStatus.RUNNING)
        store.transition_rollout(rid, RolloutStatus.SUCCEEDED)
        ids.append(rid)
    return ids


def _controller(tmp_path: Path, store, run_id: str, replay_best: int) -> Controller:
    config = HarnessConfig.model_validate({
        "run": {"dir": str(tmp_path / "run")},
        "runner": {"command": [sys.executable, "-c", "pass"], "sandbox": "none"},
        "training": {"estimator": "dr_grpo", "replay_best": replay_best},
        "base_dir": tmp_path,
    })
    return Controller(config, SimpleNamespace(store=store), run_id, {})  # type: ignore[arg-type]


def test_the_controller_replays_an_earlier_success_read_back_from_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    run_id = store.create_run("r", {}).id
    first = _step(store, run_id, 1, [1.0, 0.0, 0.0, 0.0])
    second = _step(store, run_id, 2, [0.25, 0.0, 0.0, 0.0])
    ctl = _controller(tmp_path, store, run_id, replay_best=2)  # a fresh controller: the pool is in the store
    cfg = TrainingConfig(estimator="dr_grpo")

    batch = batch_from_store(store, second, cfg)
    on_policy = len(batch.samples)
    ctl._add_replays(2, batch)

    (replayed,) = batch.samples[on_policy:]  # step 1's only attempt above 0.25
    assert replayed.rollout_id == first[0] and replayed.token_ids == [1, 2, 3, 11, 20]
    assert replayed.advantage == pytest.approx(1.0 - 0.0625)
    assert replayed.loss_mask == [0, 0, 0, 1, 1]
    assert replayed.behaviour_logprobs[:3] == [0.0, 0.0, 0.0] and all(map(math.isnan, replayed.behaviour_logprobs[3:]))
    assert batch.counts["replay.rollouts"] == 1 and batch.counts["replay.candidates"] == 1
    assert batch.advantages[f"replay:{first[0]}"] == pytest.approx(0.9375)

    third = _step(store, run_id, 3, [1.0, 0.25, 0.0, 0.0])  # the policy found the 1.0 itself: no replay
    batch = batch_from_store(store, third, cfg)
    n = len(batch.samples)
    ctl._add_replays(3, batch)
    assert len(batch.samples) == n and batch.counts["replay.rollouts"] == 0
    store.close()


@pytest.mark.parametrize("extra", [{"run": {"mode": "rft"}}, {"run": {"mode": "distill"}},
                                   {"policies": {"a": {}, "b": {"frozen": True}}}])
def test_replay_is_refused_where_it_would_be_ignored(tmp_path: Path, extra: dict) -> None:
    body = {"training": {"replay_best": 2}, "base_dir": tmp_path, **extra}
    with pytest.raises(ValueError, match="replay_best is not used with"):
        HarnessConfig.model_validate(body)
    body["training"] = {}
    HarnessConfig.model_validate(body)  # the same config without it loads
