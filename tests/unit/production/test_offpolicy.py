"""Off-policy training from production sessions: the running-mean baseline and task groups (by hand),
staleness, truncated importance weights that change the update, and one real update on a tiny Llama
through the store (version recorded, sessions marked, adapter folder written, nothing trained twice)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
import torch
from unit.store._helpers import make_call
from unit.store._sessions import NOW, add_session
from unit.training._helpers import VOCAB, make_sample, tiny_llama, with_own_behaviour

from harnessrl.config import HarnessConfig
from harnessrl.production.advantages import RunningMean, min_served_version, session_advantages
from harnessrl.production.combine import decider
from harnessrl.production.config import FeedbackConfig
from harnessrl.production.train import ADAPTER, ProductionTrainer, off_policy_config, production_batch
from harnessrl.store import Store
from harnessrl.store.feedback import STALE
from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.trainer import Trainer


# -- the baseline ---------------------------------------------------------------------------------------
def test_running_mean_first_step_uses_its_own_mean_then_the_average() -> None:
    rm = RunningMean(decay=0.5)
    assert rm.baseline([1.0, 0.0, 0.0, 1.0]) == 0.5
    rm.update([1.0, 0.0, 0.0, 1.0])  # 0.5
    rm.update([1.0, 1.0])  # 0.5 * 0.5 + 0.5 * 1.0
    assert rm.value == 0.75 and rm.baseline([0.0]) == 0.75  # the step's own outcomes are not in it
    replayed = RunningMean.replay(0.5, [(7, 1.0), (3, 1.0), (3, 0.0), (7, 1.0), (3, 0.0), (3, 1.0)])
    assert (replayed.value, replayed.steps) == (0.75, 2)  # grouped by version, in version order
    with pytest.raises(ValueError, match="baseline_decay"):
        RunningMean(1.0)


def test_advantages_against_the_running_mean_or_a_task_group() -> None:
    rm = RunningMean(0.9)
    rm.update([0.4])
    outcomes = {"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.2}
    assert session_advantages(outcomes, rm) == pytest.approx({"a": 0.6, "b": -0.4, "c": 0.1, "d": -0.2})
    groups = {"a": "t1", "b": "t1", "c": "t2"}  # a and b share a task (mean 0.5); c alone; d unknown
    assert session_advantages(outcomes, rm, groups) == pytest.approx({"a": 0.5, "b": -0.5, "c": 0.1, "d": -0.2})
    assert rm.value == 0.4  # read, not updated


def test_staleness_floor() -> None:
    assert min_served_version(5, 2) == 3 and min_served_version(0, 2) == -2


# -- importance weights ---------------------------------------------------------------------------------
def _trainer(tis_cap: float | None) -> Trainer:
    cfg = TrainingConfig(lr=1e-2, lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
                         device="cpu", grad_clip=None, tis_cap=tis_cap, entropy_metric=False)
    return Trainer(tiny_llama(), cfg)


def _with_behaviour(trainer: Trainer, shift: float) -> list:
    """Samples whose behaviour logprobs are the trainer's own plus ``shift`` (another version served them)."""
    samples = [make_sample([(7 * i + 3 * t) % VOCAB for t in range(12)], [0] * 4 + [1] * 8, rollout_id=f"r{i}")
               for i in range(3)]
    return with_own_behaviour(trainer.model, samples, shift)


def test_truncated_importance_weights_scale_the_update() -> None:
    """p_trainer / p_behaviour = e^5 is truncated to the cap (2); e^-1 is kept: the gradient of the
    second is e^-1 / 2 of the first's. Ignoring the weights would make both gradients equal."""
    big, small = _trainer(2.0), _trainer(2.0)
    m_big = big.step(_with_behaviour(big, -5.0))
    m_small = small.step(_with_behaviour(small, +1.0))
    assert m_big["is_weight_mean"] == pytest.approx(2.0)
    assert m_small["is_weight_mean"] == pytest.approx(math.exp(-1), rel=1e-4)
    assert m_small["grad_norm"] / m_big["grad_norm"] == pytest.approx(math.exp(-1) / 2.0, rel=1e-3)


def test_off_policy_training_always_truncates() -> None:
    assert off_policy_config(TrainingConfig(), 2.0).tis_cap == 2.0
    assert off_policy_config(TrainingConfig(tis_cap=5.0), 2.0).tis_cap == 5.0  # [training] tis_cap wins


# -- through the store ----------------------------------------------------------------------------------
def _record(store: Store, sid: str, *, version: int, outcome: float | None, prompt: list[int],
            closes_at: float = NOW) -> str:
    rid = add_session(store, sid, version=version, closes_at=closes_at)
    assert rid is not None
    call = make_call(rid, prompt, [(sum(prompt) + 5 * t) % VOCAB for t in range(6)])
    call.policy_version = version
    store.record_calls([call, make_call(rid, prompt + call.choices[0].token_ids + [1, 2], [4, 5, 6])])
    if outcome is not None:
        store.add_feedback("support", sid, "thumbs", outcome, now=closes_at - 1)
    store.close_window("support", sid, decider(FeedbackConfig(missing="drop")), now=closes_at)
    return rid


def test_batch_from_sessions_carries_outcome_advantage_and_behaviour(store: Store) -> None:
    ra = _record(store, "a", version=0, outcome=1.0, prompt=[1, 2, 3])
    rb = _record(store, "b", version=0, outcome=0.0, prompt=[1, 2, 3])
    rc = _record(store, "c", version=0, outcome=1.0, prompt=[9, 9])
    sessions = store.trainable_sessions("support", 0)
    rm = RunningMean(0.9)
    rm.update([0.25])
    batch = production_batch(store, sessions, TrainingConfig(), rm, "task", trainer_version=2)
    assert batch.rewards == {ra: 1.0, rb: 0.0, rc: 1.0}
    assert batch.advantages == pytest.approx({ra: 0.5, rb: -0.5, rc: 0.75})  # a, b: one task; c: running mean
    assert batch.counts["groups.trained"] == 1 and batch.counts["sessions.trained"] == 3
    inverted = production_batch(store, sessions, TrainingConfig(), rm, "task", invert=True)
    assert inverted.advantages == pytest.approx({ra: -0.5, rb: 0.5, rc: -0.75})  # invert_feedback: worse on purpose
    assert inverted.rewards == batch.rewards
    assert batch.counts["sessions.staleness_max"] == 2 and batch.counts["calls.merged"] == 3
    damped = production_batch(store, sessions, TrainingConfig(positive_weight=0.2), rm, "task")
    assert damped.advantages == pytest.approx({ra: 0.1, rb: -0.5, rc: 0.15})  # [training] positive_weight applies
    for s in batch.samples:  # both calls merged into one sample with the recorded logprobs
        assert s.advantage == batch.advantages[s.rollout_id]
        assert [lp for lp, m in zip(s.behaviour_logprobs, s.loss_mask, strict=True) if m] == \
            [-0.5 * i for i in range(6)] + [-0.5 * i for i in range(3)]


def _production_trainer(store: Store, **training: object) -> ProductionTrainer:
    cfg = HarnessConfig.model_validate({
        "run": {"source": "production", "deployment": "support"},
        "production": {"training": {"min_sessions": 2, "max_staleness": 1, **training}},
    })
    tcfg = TrainingConfig(lr=1e-2, lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
                          device="cpu", tis_cap=2.0, entropy_metric=False)
    return ProductionTrainer(store, Trainer(tiny_llama(), tcfg), "support", cfg.production.training)


def test_one_update_records_a_version_marks_sessions_and_drops_stale(store: Store, tmp_path: Path) -> None:
    _record(store, "old", version=0, outcome=1.0, prompt=[5, 6])
    _record(store, "x", version=2, outcome=1.0, prompt=[1, 2, 3])
    _record(store, "y", version=3, outcome=0.0, prompt=[4, 2, 3])
    _record(store, "unrated", version=3, outcome=None, prompt=[4, 4])  # dropped: never trained
    loop = _production_trainer(store)
    loop.trainer.policy_version = 3  # the trainer is at version 3: version 0 is too stale (max_staleness 1)
    step = loop.train_once(tmp_path)
    assert step is not None and step.version == 4 and sorted(step.sessions) == ["x", "y"] and step.stale == 1
    assert step.metrics["count/sessions.stale_dropped"] == 1 and step.metrics["count/sessions.trained"] == 2
    assert step.metrics["is_weight_mean"] > 0 and step.metrics["samples/rollouts"] == 2
    assert store.get_session_window("support", "old").trained_version == STALE
    assert store.get_session_window("support", "x").trained_version == 4
    run_id = store.get_deployment("support").run_id  # type: ignore[attr-defined]
    [pv] = store.list_policy_versions(run_id)
    assert pv.version == 4 and pv.metadata["sessions"] == 2 and pv.checkpoint_path == str(step.checkpoint)
    assert (step.checkpoint / ADAPTER / "adapter_config.json").is_file()  # what the canary serves
    assert loop.train_once(tmp_path) is None  # nothing left: nothing trained twice
    assert loop.baseline.value == 0.5 and loop.baseline.steps == 1
    # restarted: the running mean comes back from the store
    assert _production_trainer(store).baseline.value == 0.5


def test_restore_goes_back_to_the_stable_weights(store: Store, tmp_path: Path) -> None:
    for i, sid in enumerate(("p", "q", "r", "s")):
        _record(store, sid, version=0, outcome=float(i % 2), prompt=[i + 1, 2], closes_at=NOW + i)
    loop = _production_trainer(store, max_sessions=2)
    lora = {n: p for n, p in loop.trainer.model.named_parameters() if "lora_B" in n}
    first = loop.train_once(tmp_path)
    assert first is not None
    after_first = {n: p.detach().clone() for n, p in lora.items()}
    second = loop.train_once(tmp_path)
    assert second is not None and second.version == first.version + 1
    assert any(not torch.equal(p, after_first[n]) for n, p in lora.items())
    assert not loop.settle(second.version)  # promoted: nothing to undo
    assert loop.settle(first.version)  # the second was rolled back: the trainer is at the first again
    assert all(torch.equal(p, after_first[n]) for n, p in lora.items())
    assert loop.trainer.policy_version == first.version and loop.trainer.step_count == 2
    assert loop.next_version() == second.version + 1  # numbers are never reused
    loop.restore(0)  # the base model: the adapter adds nothing
    assert all(not p.any() for p in lora.values()) and loop.trainer.policy_version == 0


def test_the_sink_waits_for_the_canarys_decision(store: Store) -> None:
    from harnessrl.production.train import CandidateSink
    from harnessrl.store.canary import CanaryDecision

    add_session(store, "any")  # the deployment
    sink = CandidateSink("http://127.0.0.1:9", "t", store, "support")  # no request is sent here
    assert sink.decided() == (True, None)  # nothing offered
    sink.pending = 3
    store.add_canary_decision(CanaryDecision("support", "start", 2, 3, 0.5, {"arms": []}, "started"))  # type: ignore[attr-defined]
    assert sink.decided() == (False, None)
    store.add_canary_decision(CanaryDecision("support", "rollback", 2, 3, 0.5, {"arms": []}, "worse"))  # type: ignore[attr-defined]
    assert sink.decided() == (True, 2) and sink.pending is None
    assert sink.decided() == (True, None)  # reported once
    asyncio.run(sink.aclose())
