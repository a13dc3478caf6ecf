"""Two CPU processes under torchrun (FSDP, gloo on loopback) train exactly like one process on the same batch.

One ``torchrun --standalone --nproc_per_node 2`` run does every variant (full fine-tuning, LoRA, and LoRA
with PPO mini-batches/epochs/truncated IS): a
step, a publish, a checkpoint, and a fresh trainer resumed from it stepping again. The same runs in this
process (no WORLD_SIZE) are the reference. The fixed batch packs into 3 micro-batches, so one rank also
runs the zero-weight filler micro-batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from harnessrl.training.fsdp_parallel import DistContext, dummy_micro_batch, is_dummy
from harnessrl.training.fsdp_smoke import one_step

VARIANTS = ("full", "lora", "ppo")
PUBLISHED = {"full": "model.safetensors", "lora": "adapter_model.safetensors", "ppo": "adapter_model.safetensors"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    single, multi = tmp_path_factory.mktemp("single"), tmp_path_factory.mktemp("multi")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "harnessrl.training.fsdp_smoke", "--out", str(multi), "--variants", *VARIANTS, "--resume"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for v in VARIANTS:  # the single-process reference runs meanwhile
        one_step(single / f"{v}.pt", variant=v, workdir=single / v)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-4000:]
    return {"single": single, "multi": multi}


def _load(runs: dict[str, Path], which: str, variant: str) -> dict:
    return torch.load(runs[which] / f"{variant}.pt", weights_only=False)


def _assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-5, atol=1e-6, msg=name)


LR, ADAM_EPS = 1e-2, 1e-8  # harnessrl.training.fsdp_smoke's trainer: lr=1e-2, torch's AdamW eps


def _assert_weights_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], grads_a: dict, grads_b: dict,
                          steps: int) -> None:
    """Weights after ``steps`` Adam steps agree up to what the two runs' gradient difference explains.

    Why not a flat tolerance: Adam's update lr*g/(|g|+eps) has slope lr*eps/(|g|+eps)^2 in g, 1.4e5 at
    g ~ 1.7e-8 with lr 1e-2. The all-reduce sums gradients in another order than one process, so a
    rounding difference of 3e-11 in such a gradient moves the weight by 4e-6, on some CPUs and not others.
    The allowance is that slope times the measured gradient difference (x2 per step for the linearization),
    so it vanishes wherever the gradients are equal or large.
    """
    assert sorted(a) == sorted(b)
    for name in a:
        ga, gb = grads_a[name], grads_b[name]
        g = torch.minimum(ga.abs(), gb.abs())
        adam = 2 * steps * LR * ADAM_EPS / (g + ADAM_EPS) ** 2 * (ga - gb).abs()
        allowed = 1e-6 + 1e-5 * a[name].abs() + adam
        excess = (b[name] - a[name]).abs() / allowed
        worst = int(excess.argmax())
        assert float(excess.max()) <= 1.0, (
            f"{name}: |diff| {float((b[name] - a[name]).abs().flatten()[worst]):.3g} > allowed "
            f"{float(allowed.flatten()[worst]):.3g} (grads {float(ga.flatten()[worst]):.3g} vs {float(gb.flatten()[worst]):.3g})")


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_and_weights_match_single_process(runs, variant):
    one, two = _load(runs, "single", variant), _load(runs, "multi", variant)
    assert one["grads"] and any(float(g.abs().max()) > 1e-4 for g in one["grads"].values())  # a real step
    _assert_close(one["grads"], two["grads"])
    _assert_weights_close(one["weights"], two["weights"], one["grads"], two["grads"], steps=1)
    if variant == "ppo":
        assert one["metrics"]["updates"] == 4 == two["metrics"]["updates"]  # 2 mini-batches x 2 epochs
    else:
        assert one["metrics"]["micro_batches"] == 3  # odd: rank 1 ran the filler micro-batch
    for key in ("loss", "grad_norm", "tokens/trained", "tokens/total", "clip_fraction", "approx_kl", "entropy"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-5, abs=1e-7), key


@pytest.mark.parametrize("variant", VARIANTS)
def test_checkpoint_resume_and_publish_match_single_process(runs, variant):
    one, two = _load(runs, "single", variant), _load(runs, "multi", variant)
    changed = max(float((one["resumed_weights"][n] - one["weights"][n]).abs().max()) for n in one["weights"])
    assert changed > 1e-4  # the resumed step moved the weights (Adam state restored, not reset)
    _assert_weights_close(one["resumed_weights"], two["resumed_weights"], one["grads"], two["grads"], steps=2)
    name = PUBLISHED[variant]
    published = [load_file(str(runs[which] / variant / "publish" / "v000001" / name)) for which in ("single", "multi")]
    if variant == "full":  # the whole model: the trained tensors carry step 1's Adam allowance
        _assert_weights_close(*published, one["grads"], two["grads"], steps=1)
    else:
        _assert_close(*published)


def test_only_rank_zero_writes_metrics(runs):
    lines = (runs["multi"] / "full" / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["step"] == 1


def test_share_is_deterministic_strided_and_padded():
    mbs = [dummy_micro_batch() for _ in range(3)]
    for i, mb in enumerate(mbs):
        mb.sample_indices = [i]
    rank0 = DistContext(rank=0, world_size=2).share(mbs)
    rank1 = DistContext(rank=1, world_size=2).share(mbs)
    assert [mb.sample_indices for mb in rank0] == [[0], [2]]
    assert rank1[0].sample_indices == [1] and is_dummy(rank1[1]) and len(rank1) == 2
    assert DistContext().share(mbs) == mbs


@pytest.mark.parametrize("mode", ["same", "different"])
def test_ranks_with_different_batches_are_refused(mode):
    worker = Path(__file__).with_name("_batch_check_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker), mode]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120).stdout
    for rank in (0, 1):
        expected = f"rank {rank}: same" if mode == "same" else f"rank {rank}: refused: ranks were given different"
        assert expected in out, out
