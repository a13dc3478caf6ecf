"""Real updates on a tiny random Llama: loss goes down, LoRA touches only adapters, resume is exact."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.train_batch import TrainBatch
from harnessrl.training.trainer import Trainer
from harnessrl.training.trainer_state import CheckpointError
from harnessrl.weights.publish import FolderPublisher, InProcessPublisher

from ._helpers import VOCAB, make_sample, tiny_llama, with_own_behaviour


def _batch(model, n: int = 6, seed: int = 0) -> list:
    """Fixed on-policy batch: behaviour logprobs are the model's own, advantages +-1 per rollout."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        length = rng.randint(6, 20)
        toks = [rng.randrange(VOCAB) for _ in range(length)]
        mask = [0] * 3 + [1] * (length - 3)
        samples.append(make_sample(toks, mask, rollout_id=f"r{i}", advantage=1.0 if i % 2 else -1.0))
    return with_own_behaviour(model, samples)


def _cfg(**kw) -> TrainingConfig:
    # fp32: these tests compare steps to 1e-5 (`auto` picks bf16 autocast on a CPU with native bf16)
    base = dict(lr=5e-3, lora=LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]), micro_batch_tokens=40,
                device="cpu", dtype="float32")
    base.update(kw)
    return TrainingConfig(**base)


@pytest.mark.parametrize("lora", [True, False])
def test_updates_lower_the_loss_on_a_fixed_batch(lora):
    model = tiny_llama()
    batch = _batch(model)
    trainer = Trainer(model, _cfg(lora=_cfg().lora if lora else None, lr=5e-3 if lora else 1e-3, clip_eps=10.0))
    losses = [trainer.step(batch)["loss"] for _ in range(4)]
    assert losses[-1] < losses[0] - 1e-3, losses
    first = trainer.step(batch)
    assert first["micro_batches"] > 1  # gradient accumulation across micro-batches was exercised
    assert first["samples/count"] == 6 and first["tokens/trained"] == sum(sum(s.loss_mask) for s in batch)


def test_lora_update_changes_only_adapter_weights():
    model = tiny_llama()
    batch = _batch(model)
    trainer = Trainer(model, _cfg())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.step(batch)
    trainer.step(batch)
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed, "nothing changed"
    assert all("lora_" in n for n in changed), sorted(changed)[:5]
    assert any("lora_A" in n for n in changed) and any("lora_B" in n for n in changed)


def test_packed_padded_and_checkpointed_steps_agree():
    model = tiny_llama()
    batch = _batch(model)
    a = Trainer(tiny_llama(), _cfg(packing="packed")).step(batch)
    b = Trainer(tiny_llama(), _cfg(packing="padded")).step(batch)
    c = Trainer(tiny_llama(), _cfg(gradient_checkpointing=True)).step(batch)
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-5) and a["loss"] == pytest.approx(c["loss"], abs=1e-5)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert a["grad_norm"] == pytest.approx(c["grad_norm"], rel=1e-4)
    assert a["samples/exact"] == len(batch)
    assert a["tokens/padding"] == 0 and b["tokens/padding"] > 0


def test_resume_from_checkpoint_equals_uninterrupted_run(tmp_path):
    batch1, batch2 = _batch(tiny_llama(), seed=1), _batch(tiny_llama(), seed=2)
    straight = Trainer(tiny_llama(), _cfg(seed=7))
    straight.step(batch1)
    path = straight.save_checkpoint(tmp_path / "ck")
    m_straight = straight.step(batch2)
    after_straight = torch.rand(3)

    resumed = Trainer(tiny_llama(), _cfg(seed=7))
    resumed.load_checkpoint(path)
    assert resumed.step_count == 1
    m_resumed = resumed.step(batch2)
    assert torch.equal(torch.rand(3), after_straight)  # RNG restored too
    assert m_resumed["loss"] == m_straight["loss"] and m_resumed["grad_norm"] == m_straight["grad_norm"]
    for (n, p), (_, q) in zip(straight.model.named_parameters(), resumed.model.named_parameters(), strict=True):
        assert torch.equal(p, q), n

    full = Trainer(tiny_llama(), _cfg(lora=None))
    with pytest.raises(CheckpointError, match="does not match"):
        full.load_checkpoint(path)


def test_a_resumed_run_trains_at_its_own_lr_with_the_saved_moments(tmp_path):
    first = Trainer(tiny_llama(), _cfg(lr=5e-3))
    first.step(_batch(tiny_llama(), seed=1))
    path = first.save_checkpoint(tmp_path / "ck")
    resumed = Trainer(tiny_llama(), _cfg(lr=2e-2))
    resumed.load_checkpoint(path)
    assert [g["lr"] for g in resumed.optimizer.param_groups] == [2e-2] * len(resumed.optimizer.param_groups)
    assert resumed.optimizer.state  # Adam's moments came back with the checkpoint


def test_warmup_scales_the_first_steps_lr_and_continues_after_a_resume(tmp_path):
    """Step k trains at lr x (k+1)/(warmup+1); the first update of a warmed-up run moves the weights less."""
    batch = _batch(tiny_llama(), seed=3)
    warm = Trainer(tiny_llama(), _cfg(warmup_steps=2))
    cold = Trainer(tiny_llama(), _cfg())
    assert [warm.step(batch)["lr"] for _ in range(2)] == pytest.approx([5e-3 / 3, 5e-3 * 2 / 3])
    assert cold.step(batch)["lr"] == 5e-3

    def moved(trainer):
        return sum(float(p.detach().abs().sum()) for n, p in trainer.model.named_parameters() if "lora_B" in n)

    first_warm = Trainer(tiny_llama(), _cfg(warmup_steps=2))
    first_warm.step(batch)
    assert 0 < moved(first_warm) < moved(cold) / 2  # lora_B starts at 0: what moved is the first update
    path = warm.save_checkpoint(tmp_path / "ck")
    resumed = Trainer(tiny_llama(), _cfg(warmup_steps=2))
    resumed.load_checkpoint(path)
    assert resumed.step(batch)["lr"] == pytest.approx(5e-3)  # step 2: warmup over


def test_a_step_with_nothing_to_train_does_not_use_up_the_warmup(tmp_path):
    """A held or all-alike step makes no update, so AdamW's first (sign-sized) update is still to come: the
    next step that trains starts the warmup, also after a resume."""
    batch = _batch(tiny_llama(), seed=3)
    trainer = Trainer(tiny_llama(), _cfg(warmup_steps=2))
    for _ in range(3):
        assert trainer.step([])["updates"] == 0
    assert not trainer.optimizer.state  # nothing moved
    assert trainer.step(batch)["lr"] == pytest.approx(5e-3 / 3)
    assert trainer.step_count == 4 and trainer.updating_steps == 1
    resumed = Trainer(tiny_llama(), _cfg(warmup_steps=2))
    resumed.load_checkpoint(trainer.save_checkpoint(tmp_path / "ck"))
    assert resumed.step_count == 4 and resumed.step(batch)["lr"] == pytest.approx(5e-3 * 2 / 3)


def test_kl_to_reference_is_zero_at_start_then_positive():
    model = tiny_llama()
    batch = _batch(model)
    trainer = Trainer(model, _cfg(kl_coef=0.1))
    assert trainer.step(batch)["ref_kl"] == pytest.approx(0.0, abs=1e-9)  # LoRA B starts at 0: policy == base
    assert trainer.step(batch)["ref_kl"] > 0


def test_metrics_publish_and_policy_versions(tmp_path):
    class Engine:
        def __init__(self):
            self.calls = []

        def update_weights(self, state_dict=None, *, lora=None, lora_config=None, version=None):
            self.calls.append((state_dict, sorted(lora), lora_config.r, version))
            return version

    class Versions:
        def __init__(self):
            self.rows = []

        def add_policy_version(self, version, checkpoint_path, run_id=None, metadata=None):
            self.rows.append((version, checkpoint_path, run_id, metadata))

    engine, store = Engine(), Versions()
    publisher = InProcessPublisher(engine, folder=FolderPublisher(tmp_path / "weights"))
    model = tiny_llama()
    batch = TrainBatch(samples=_batch(model), rewards={"r0": 0.0, "r1": 1.0}, counts={"fidelity.exact": 6})
    trainer = Trainer(model, _cfg(), run_dir=tmp_path / "run", publisher=publisher, store=store, run_id="run1")
    metrics = trainer.step(batch)
    assert metrics["reward/mean"] == 0.5 and metrics["count/fidelity.exact"] == 6
    assert trainer.publish() == 1
    ((state, adapter_keys, rank, version_sent),) = engine.calls
    assert state is None and rank == 4 and version_sent == 1
    assert adapter_keys and all("lora_" in k for k in adapter_keys)
    (version, path, run_id, meta) = store.rows[0]
    assert (version, run_id, meta) == (1, "run1", {"step": 1})
    assert (tmp_path / "weights" / "v000001" / "adapter_model.safetensors").is_file() and path.endswith("v000001")
    trainer.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and "time/forward_backward_s" in rows[0] and "entropy" in rows[0]
    assert any((tmp_path / "run" / "tb").iterdir())


def test_empty_batch_is_a_counted_no_op():
    trainer = Trainer(tiny_llama(), _cfg())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    m = trainer.step(TrainBatch(samples=[], counts={"groups.zero_variance": 2}))
    assert m["skipped"] == 1 and m["count/groups.zero_variance"] == 2 and trainer.step_count == 1
    assert all(torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())


def test_shared_prefix_step_equals_whole_sample_packing():
    from .test_micro_batches import _group_samples

    batch = _group_samples()
    shared = Trainer(tiny_llama(), _cfg(share_prefix_min=8, micro_batch_tokens=400))
    whole = Trainer(tiny_llama(), _cfg(share_prefix_min=None, micro_batch_tokens=400))
    a, b = shared.step(batch), whole.step(batch)
    assert a["tokens/shared_prefix_saved"] > 0 and b["tokens/shared_prefix_saved"] == 0
    assert a["tokens/total"] == b["tokens/total"]
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    for (n, p), (_, q) in zip(shared.model.named_parameters(), whole.model.named_parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), n


def test_full_finetune_publishes_a_loadable_safetensors_folder(tmp_path):
    from transformers import AutoModelForCausalLM

    model = tiny_llama()
    trainer = Trainer(model, _cfg(lora=None, lr=1e-2), publisher=FolderPublisher(tmp_path))
    trainer.step(_batch(model))
    assert trainer.publish() == 1
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "v000001")
    for name, p in trainer.model.named_parameters():
        assert torch.equal(p.detach(), loaded.get_parameter(name)), name


def _params(trainer: Trainer) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters() if p.requires_grad])


def test_two_ppo_epochs_equal_two_steps_on_the_same_batch():
    """Without truncated IS the ratio is against the engine's logprobs, so epoch 2 is exactly a second step."""
    torch.manual_seed(0)
    batch = _batch(tiny_llama())
    once = Trainer(tiny_llama(), _cfg(ppo_epochs=2))
    twice = Trainer(tiny_llama(), _cfg())
    m = once.step(batch)
    twice.step(batch)
    twice.step(batch)
    assert m["updates"] == 2 and once.step_count == 1
    assert m["tokens/trained"] == sum(sum(s.loss_mask) for s in batch)  # counted once, not per epoch
    assert torch.allclose(_params(once), _params(twice), atol=1e-6)
    assert not torch.allclose(_params(once), _params(Trainer(tiny_llama(), _cfg()))), "nothing was trained"


def test_mini_batches_take_one_update_per_part_of_whole_rollouts():
    batch = _batch(tiny_llama(), n=6)
    trainer = Trainer(tiny_llama(), _cfg(mini_batches=3, ppo_epochs=2))
    m = trainer.step(batch)
    assert m["updates"] == 6
    state = trainer.optimizer.state_dict()["state"]
    assert {int(s["step"]) for s in state.values()} == {6}  # AdamW saw six steps
    # more mini-batches than rollouts: one update per rollout, no empty update
    m = Trainer(tiny_llama(), _cfg(mini_batches=50)).step(batch[:2])
    assert m["updates"] == 2


def test_several_updates_with_truncated_is_fix_the_old_policy_before_the_first():
    """With tis_cap the ratio of every update is against the trainer as it was before the step's first one.

    A tiny clip range makes that visible: the first update's ratio is exactly 1 (nothing moved yet), so it
    clips nothing; the second update's tokens moved with the first update, so against the pre-step policy
    most are clipped. Old logprobs re-taken before each update would give a ratio of 1 there too.
    """
    batch = _batch(tiny_llama())
    one = Trainer(tiny_llama(), _cfg(tis_cap=2.0, clip_eps=1e-4)).step(batch)
    two = Trainer(tiny_llama(), _cfg(tis_cap=2.0, clip_eps=1e-4, ppo_epochs=2)).step(batch)
    assert one["updates"] == 1 and two["updates"] == 2
    assert math.isfinite(two["loss"])
    assert one["clip_fraction"] == 0.0  # an update against the policy it starts from clips nothing
    # clip_fraction is over both updates' tokens: the first contributes 0, so > 0.25 means most of the second
    assert two["clip_fraction"] > 0.25, two["clip_fraction"]


def test_entropy_bonus_keeps_the_policy_entropy_higher_than_without():
    """The same peaked policy, batch and updates with and without the bonus; every attempt rewarded, so
    plain policy gradient sharpens the policy onto the sampled tokens, and the bonus resists it."""
    ends = {}
    for coef in (0.0, 0.5):
        model = tiny_llama()
        with torch.no_grad():
            model.lm_head.weight.mul_(30.0)  # a peaked distribution (a random one is near uniform, flat gradient)
        batch = [s.__class__(**{**{f: getattr(s, f) for f in s.__slots__}, "advantage": 1.0}) for s in _batch(model)]
        trainer = Trainer(model, _cfg(entropy_coef=coef, clip_eps=10.0, lr=1e-2, lora=None))
        ends[coef] = [trainer.step(batch)["entropy"] for _ in range(6)]
    assert ends[0.0][-1] < ends[0.0][0], ends  # without the bonus the policy sharpens
    assert ends[0.5][-1] > ends[0.0][-1] + 0.05, ends


def test_a_replayed_sample_trains_as_if_sampled_by_the_current_policy():
    """NaN behaviour logprobs (success replay) give exactly the update of the same sample carrying the
    current policy's own logprobs: ratio 1, nothing clipped, a finite loss."""
    import dataclasses

    batch = _batch(tiny_llama(), seed=4)
    stale = dataclasses.replace(batch[1], behaviour_logprobs=[-9.0 if m else 0.0 for m in batch[1].loss_mask])
    replayed = dataclasses.replace(batch[1], behaviour_logprobs=[math.nan if m else 0.0 for m in batch[1].loss_mask])
    own, as_replay, as_stale = (Trainer(tiny_llama(), _cfg()) for _ in range(3))
    m_own = own.step(batch)
    m_replay = as_replay.step([batch[0], replayed, *batch[2:]])
    as_stale.step([batch[0], stale, *batch[2:]])
    assert math.isfinite(m_replay["loss"]) and m_replay["loss"] == pytest.approx(m_own["loss"], abs=1e-7)
    assert m_replay["clip_fraction"] == pytest.approx(m_own["clip_fraction"])
    for (_, p), (_, q) in zip(own.model.named_parameters(), as_replay.model.named_parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-7)
    assert any(not torch.allclose(p, r, atol=1e-7)
               for (_, p), (_, r) in zip(own.model.named_parameters(), as_stale.model.named_parameters(), strict=True))
