"""One trainer step on the tiny model and a fixed batch, plainly or under ``torchrun`` (FSDP data parallel).

The integration test runs it with one and with two processes (gloo on CPU) and compares the gradients and
weights; it is also a smoke check for a cluster's setup (``--help`` for options)::

    torchrun --nproc_per_node 2 -m harnessrl.training.fsdp_smoke --out /tmp/step.pt

The data-parallel machinery itself lives in ``harnessrl.training.fsdp_parallel``.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from harnessrl.models.tiny import tiny_model
from harnessrl.training.config import LoraConfig, TrainingConfig
from harnessrl.training.fsdp_parallel import DistContext, DistributedError
from harnessrl.training.trainer import Trainer
from harnessrl.weights.publish import FolderPublisher

__all__ = ["DistContext", "DistributedError", "fixed_batch", "main", "one_step"]

logger = logging.getLogger(__name__)


# -- a runnable step on the tiny model (the integration test and a smoke check under torchrun) ----------
def fixed_batch(model: torch.nn.Module, vocab: int, n: int = 8, seed: int = 0) -> list[Any]:
    """A deterministic batch of ``n`` samples (4 groups of 2 rollouts) with on-policy behaviour logprobs."""
    import random

    from harnessrl.training.forward import token_logprobs
    from harnessrl.training.micro_batches import make_micro_batches
    from harnessrl.types import Sample, SampleFidelity

    rng = random.Random(seed)
    samples = []
    for i in range(n):
        length = rng.randint(8, 24)
        toks = [rng.randrange(vocab) for _ in range(length)]
        mask = [0] * 4 + [1] * (length - 4)
        samples.append(Sample(
            rollout_id=f"r{i}", group_id=f"g{i // 2}", token_ids=toks, loss_mask=mask,
            behaviour_logprobs=[0.0] * length, policy_versions=[0], call_indices=[0],
            fidelity=SampleFidelity.EXACT, advantage=(1.0 if i % 2 else -1.0) * (1 + 0.1 * i),
        ))
    for mb in make_micro_batches(samples, [[1.0] * len(s.token_ids) for s in samples], 1 << 30):
        with torch.no_grad():
            lp, _ = token_logprobs(model, mb, torch.device("cpu"))
        k = 0
        for i in mb.sample_indices:
            s = samples[i]
            for t in range(1, len(s.token_ids)):
                if s.loss_mask[t]:
                    s.behaviour_logprobs[t] = float(lp[k]) - 0.05 * (t % 3)  # off-policy a little
                    k += 1
    return samples


#: Variants: full fine-tuning; a LoRA adapter; LoRA with PPO mini-batches, epochs and truncated IS
#: (several updates per step, the "old" logprobs computed before the first one).
VARIANTS: dict[str, dict[str, Any]] = {
    "full": {"lora": None},
    "lora": {},
    "ppo": {"mini_batches": 2, "ppo_epochs": 2, "tis_cap": 2.0},
}


def _new_trainer(variant: str, micro_batch_tokens: int, grad_clip: float | None, work: Path | None
                 ) -> tuple[Trainer, list[Any]]:
    model, tok = tiny_model(hidden_size=32, intermediate_size=64)
    samples = fixed_batch(model, len(tok))
    settings: dict[str, Any] = {"lora": LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"])}
    settings.update(VARIANTS[variant])
    # fp32: ranks and the single process are compared to a tolerance (`auto` may pick bf16 on this CPU)
    cfg = TrainingConfig(lr=1e-2, device="cpu", dtype="float32", micro_batch_tokens=micro_batch_tokens,
                         grad_clip=grad_clip, **settings)
    publisher = FolderPublisher(work / "publish") if work is not None else None
    run_dir = work / "run" if work is not None else None
    return Trainer(model, cfg, pad_token_id=tok.pad_token_id, publisher=publisher, run_dir=run_dir), samples


def _full_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    if not trainer.dist.enabled:
        return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    full = trainer.dist.full_state_dict(trainer.model)  # rank 0 only
    return {n: full[n] for n, p in trainer.model.named_parameters() if p.requires_grad and n in full}


def one_step(out: str | Path | None, *, variant: str = "full", micro_batch_tokens: int = 40,
             grad_clip: float | None = 1.0, workdir: str | Path | None = None) -> dict[str, Any]:
    """Build the tiny model and fixed batch, run one ``Trainer.step``; rank 0 saves what it saw.

    ``out`` (a ``torch.save`` file) gets ``grads`` (full tensors, as the optimizer sees them at the last
    update) and
    ``weights`` (after the step) by parameter name, plus the step's ``metrics``. With ``workdir`` the
    trainer also publishes (``workdir/publish``), checkpoints (``workdir/checkpoint``), and a fresh
    trainer resumes from that checkpoint and steps again: ``resumed_weights`` (optimizer state included);
    the first trainer's metrics go to ``workdir/run/metrics.jsonl``.
    """
    work = Path(workdir) if workdir is not None else None
    trainer, samples = _new_trainer(variant, micro_batch_tokens, grad_clip, work)
    grads: dict[str, torch.Tensor] = {}
    step = trainer.optimizer.step

    def capture(*a: Any, **k: Any) -> Any:  # grads as the optimizer sees them (after clipping)
        for n, p in trainer.model.named_parameters():
            if p.grad is not None:
                g = p.grad
                grads[n] = (g.full_tensor() if hasattr(g, "full_tensor") else g).detach().clone()
        return step(*a, **k)

    trainer.optimizer.step = capture  # type: ignore[method-assign]
    metrics = trainer.step(samples)
    result: dict[str, Any] = {"grads": grads, "weights": _full_weights(trainer), "metrics": metrics}
    if work is not None:
        result["published"] = trainer.publish()
        trainer.save_checkpoint(work / "checkpoint")
        trainer.close()
        trainer, samples = _new_trainer(variant, micro_batch_tokens, grad_clip, None)
        trainer.load_checkpoint(work / "checkpoint")
        trainer.step(samples)
        result["resumed_weights"] = _full_weights(trainer)
    if out is not None and trainer.dist.is_main:
        torch.save(result, out)
    trainer.close()
    return result


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m harnessrl.training.fsdp_smoke",
        description="One trainer step on the tiny random model and a fixed batch; run it plainly or under "
        "`torchrun --nproc_per_node N` (FSDP, gloo on CPU) and compare the saved gradients and weights.",
    )
    p.add_argument("--out", help="folder for <variant>.pt files (grads, weights, metrics; written by rank 0)")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["full"],
                   help="full fine-tuning, a LoRA adapter, and/or LoRA with PPO mini-batches and epochs, "
                   "each from the same initial weights")
    p.add_argument("--micro-batch-tokens", type=int, default=40, help="token budget per micro-batch")
    p.add_argument("--resume", action="store_true",
                   help="also publish, checkpoint, resume into a fresh trainer and step again (needs --out)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out) if args.out else None
    try:
        for variant in args.variants:
            work = out / variant if out is not None and args.resume else None
            res = one_step(out / f"{variant}.pt" if out is not None else None, variant=variant,
                           micro_batch_tokens=args.micro_batch_tokens, workdir=work)
            m = res["metrics"]
            logger.info("%s: loss %.6f grad_norm %.6f micro_batches %d", variant, m["loss"], m["grad_norm"],
                        m["micro_batches"])
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
