"""The policy update over a batch of whole groups, for any transformers causal LM.

``Trainer.step`` weighs every token once for the batch (see ``losses.token_weights``), splits the samples
into micro-batches by a token budget (packed without padding), accumulates gradients, clips and takes one
AdamW step. With ``mini_batches``/``ppo_epochs`` it takes several updates per batch, each over whole
rollouts (see ``ppo_minibatches``). Dropout is kept off (eval mode) so the trainer's logprobs match the engine's.
bf16 autocast with fp32 master weights where the device multiplies bf16 natively, else fp32 (``precision``).
"""

from __future__ import annotations

import copy
import logging
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import torch

from harnessrl.memory import peak_rss_bytes, trainer_allocations
from harnessrl.store.base import Store
from harnessrl.training import trainer_state as ckpt
from harnessrl.training.attention import FLASH, VARLEN, register_varlen_attention
from harnessrl.training.compiled import compile_layers
from harnessrl.training.config import TrainingConfig
from harnessrl.training.forward import token_logprobs
from harnessrl.training.fsdp_parallel import DistContext, is_dummy
from harnessrl.training.lora_fused import fuse_lora_linears
from harnessrl.training.losses import policy_loss, sft_loss, token_weights
from harnessrl.training.metrics import MetricsWriter
from harnessrl.training.micro_batches import MicroBatch, make_micro_batches
from harnessrl.training.ppo_minibatches import split_by_rollout
from harnessrl.training.precision import autocast_dtype
from harnessrl.training.shared_base import frozen_base_dtypes
from harnessrl.training.trackers import open_trackers
from harnessrl.training.train_batch import TrainBatch
from harnessrl.types import Sample
from harnessrl.weights.checkpoints import checkpoint_dir
from harnessrl.weights.publish import Publisher
from harnessrl.weights.versions import record_policy_version

logger = logging.getLogger(__name__)


#: Per-step metric sums, added up over ranks under data parallelism.
_SUM_KEYS = ("loss", "clipped", "approx_kl", "ratio", "is_weight", "ref_kl", "entropy", "trained_tokens", "tokens",
             "computed_tokens", "padding_tokens", "update_tokens")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Trainer:
    """Owns the policy model (optionally LoRA-wrapped), its optimizer, step counter and policy version."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainingConfig | None = None,
        *,
        run_dir: str | Path | None = None,
        publisher: Publisher | None = None,
        store: Store | None = None,
        run_id: str | None = None,
        pad_token_id: int = 0,
        policy_version: int = 0,
    ) -> None:
        self.config = config = config or TrainingConfig()
        seed_everything(config.seed)
        cuda = torch.cuda.is_available()
        self.device = torch.device(("cuda" if cuda else "cpu") if config.device == "auto" else config.device)
        self.dist = DistContext.from_env(self.device)  # torchrun with WORLD_SIZE > 1: FSDP data parallel
        self.device = self.dist.device_for(self.device)
        self.autocast_dtype = autocast_dtype(config.dtype, self.device)
        # fp32 master weights for whatever trains; a frozen LoRA base may stay bf16 under bf16 autocast (the
        # bf16 engine's own tensors when shared: casting them here would cast the engine's weights too)
        allowed = frozen_base_dtypes(self.autocast_dtype)
        frozen_bf16 = config.lora is not None and self.autocast_dtype == torch.bfloat16 and all(
            p.dtype in allowed for p in model.parameters())
        model = model.to(self.device) if frozen_bf16 else model.to(self.device, torch.float32)
        self._choose_attention(model)
        if config.lora is not None:
            model = self._wrap_lora(model)
        model.eval()  # dropout off: trainer logprobs must match the engine's sampling distribution
        if config.gradient_checkpointing:
            # transformers only checkpoints in train mode; zero every dropout instead of relying on eval()
            model.gradient_checkpointing_enable(  # type: ignore[operator]  # transformers', not nn.Module's
                gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train()
            for module in model.modules():
                if isinstance(module, torch.nn.Dropout):
                    module.p = 0.0
        if config.compile:
            compile_layers(model, distributed=self.dist.enabled)
        self.model = model
        self.ref_model: torch.nn.Module | None = None
        if config.kl_coef > 0 and config.lora is None:
            self.ref_model = copy.deepcopy(model).requires_grad_(False)  # full FT: a frozen copy (memory x2)
            self.ref_model = self.dist.shard(self.ref_model, self.device)
        model = self.dist.shard(model, self.device)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
        )
        self.step_count = 0
        #: Steps that updated the weights: lr warmup counts these, since a step with nothing to train (every
        #: group alike, or ``[run] explore_hold``) leaves AdamW's first, sign-sized update still to come.
        self.updating_steps = 0
        #: What a step minimizes: the PPO policy-gradient loss (RL), or the negative log-likelihood of the
        #: trained tokens (``harnessrl sft``, ``[run] mode = "rft"``: docs/sft.md).
        self.objective: Literal["policy_gradient", "sft"] = "policy_gradient"
        self.policy_version = policy_version
        self.publisher = publisher
        self.store = store
        self.run_id = run_id
        self.pad_token_id = pad_token_id
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.metrics: MetricsWriter | None = None  # rank 0 only; trackers open now: a missing package fails early
        if self.run_dir is not None and self.dist.is_main:
            trackers = open_trackers(config, self.run_dir, run_id or self.run_dir.name)
            self.metrics = MetricsWriter(self.run_dir, trackers)

    def _choose_attention(self, model: torch.nn.Module) -> None:
        cfg = self.config
        impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if cfg.packing != "packed" or cfg.attention == "model" or (cfg.attention == "auto" and impl in FLASH):
            return
        try:
            model.set_attn_implementation(register_varlen_attention())  # type: ignore[operator]
        except Exception as exc:  # a model outside the AttentionInterface keeps its own (dense-mask) path
            logger.warning("varlen attention unavailable for %s (%s); packed attention uses a dense mask",
                           type(model).__name__, exc)

    def _wrap_lora(self, model: torch.nn.Module) -> torch.nn.Module:
        from peft import LoraConfig, get_peft_model

        lc = self.config.lora
        assert lc is not None
        present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [t for t in lc.target_modules if t in present]
        if not targets:
            raise ValueError(
                f"none of the LoRA target_modules {lc.target_modules} exist in {type(model).__name__}; "
                f"set training.lora.target_modules to some of {sorted(present)[:20]}"
            )
        peft_cfg = LoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=0.0, target_modules=targets,
                              bias="none", task_type="CAUSAL_LM")
        wrapped = get_peft_model(model, peft_cfg)  # no adapter dropout: logprobs must match the engine's
        fuse_lora_linears(wrapped)  # the update in one matmul, not three full-width passes (lora_fused.py)
        return wrapped

    # -- the update --------------------------------------------------------------------------------------
    def step(self, batch: TrainBatch | Sequence[Sample]) -> dict[str, Any]:
        """One training step over ``batch`` (``mini_batches`` x ``ppo_epochs`` optimizer updates, 1 by
        default); returns (and writes) the step's metrics."""
        with trainer_allocations():  # trimmed before and after (harnessrl/memory.py)
            return self._step(batch)

    def _step(self, batch: TrainBatch | Sequence[Sample]) -> dict[str, Any]:
        t0 = time.perf_counter()
        tb = batch if isinstance(batch, TrainBatch) else TrainBatch(samples=list(batch))
        samples = [s for s in tb.samples if any(s.loss_mask[1:])]
        self.dist.check_same_batch(samples)
        cfg = self.config
        seed = cfg.seed * 1_000_003 + self.step_count  # same on every rank and after a resume
        parts = split_by_rollout(samples, cfg.mini_batches, seed) if samples else []
        minis = [mbs for mbs in (self._micro_batches(part) for part in parts) if mbs]
        mine = [self.dist.share(mbs) for mbs in minis]  # every rank builds all, then runs its own share
        updates = len(minis) * cfg.ppo_epochs
        # Several updates with truncated IS: the "old" policy is the trainer before this step's first update.
        old = self._old_logprobs(mine) if cfg.tis_cap is not None and updates > 1 else None
        t1 = time.perf_counter()
        for group in self.optimizer.param_groups:  # warmup by updating step: a resumed run continues it
            group["lr"] = cfg.lr * min(1.0, (self.updating_steps + 1) / (cfg.warmup_steps + 1))
        sums = cast("dict[str, float]", Counter())  # float sums; a Counter so a missing metric reads 0
        ref_time = 0.0
        norms: list[float] = []
        rng = random.Random(seed)
        for epoch in range(cfg.ppo_epochs):
            order = list(range(len(minis)))
            if epoch:
                rng.shuffle(order)
            for i in order:
                for j, mb in enumerate(mine[i]):
                    ref_time += self._accumulate(mb, None if old is None else old[i][j], sums, count=epoch == 0)
                norms.append(self._optimizer_step())
        self.dist.all_reduce_sums(sums, _SUM_KEYS)
        t2 = time.perf_counter()
        # Nothing trainable (e.g. every group had zero variance) means no update, but the step still counts
        # so that step numbers stay aligned with the controller's.
        self.step_count += 1
        self.updating_steps += updates > 0
        metrics = self._metrics(tb, samples, sums, sum(map(len, minis)), norms, updates)
        metrics.update({"time/prepare_s": t1 - t0, "time/forward_backward_s": t2 - t1 - ref_time,
                        "time/reference_s": ref_time, "time/step_s": t2 - t0,
                        "throughput/tokens_per_s": sums["tokens"] * cfg.ppo_epochs / max(t2 - t0, 1e-9)})
        if self.metrics is not None:
            self.metrics.write(self.step_count, metrics)
        return metrics

    def _micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        """Token weights normalized over ``samples`` (one update's worth), then packed by the token budget."""
        cfg = self.config
        weights = token_weights(samples, cfg.normalization)
        impl = getattr(getattr(self.model, "config", None), "_attn_implementation", None)
        share = cfg.share_prefix_min if impl == VARLEN and cfg.packing == "packed" else None
        mbs = make_micro_batches(samples, weights, cfg.micro_batch_tokens, cfg.packing, self.pad_token_id, share)
        return [mb for mb in mbs if mb.num_trained]

    @torch.no_grad()
    def _old_logprobs(self, mine: list[list[MicroBatch]]) -> list[list[torch.Tensor]]:
        return [[token_logprobs(self.model, mb, self.device, self.autocast_dtype)[0] for mb in mbs]
                for mbs in mine]

    def _accumulate(self, mb: MicroBatch, old_logp: torch.Tensor | None, sums: dict[str, float], *,
                    count: bool) -> float:
        """Forward and backward one micro-batch; add its diagnostics (and, if ``count``, its token counts)
        to ``sums``. Returns the seconds spent on reference logprobs."""
        cfg = self.config
        ref_logp = None
        ref_time = 0.0
        if cfg.kl_coef > 0:
            tr = time.perf_counter()
            ref_logp = self._reference_logprobs(mb)
            ref_time = time.perf_counter() - tr
        bonus = cfg.entropy_coef > 0 and self.objective != "sft"
        logp, entropy = token_logprobs(self.model, mb, self.device, self.autocast_dtype, cfg.entropy_metric,
                                       entropy_grad=bonus)
        if self.objective == "sft":
            out = sft_loss(logp, mb.weights.to(self.device), ref_logp=ref_logp, kl_coef=cfg.kl_coef)
        else:
            out = policy_loss(
                logp,
                mb.behaviour_logprobs.to(self.device),
                mb.advantages.to(self.device),
                mb.weights.to(self.device),
                clip_eps=cfg.clip_eps,
                clip_eps_high=cfg.clip_eps_high,
                tis_cap=cfg.tis_cap,
                ref_logp=ref_logp,
                kl_coef=cfg.kl_coef,
                old_logp=old_logp,
                entropy=entropy if bonus else None,
                entropy_coef=cfg.entropy_coef,
            )
        out.loss.backward()
        if is_dummy(mb):  # an idle rank's zero-weight filler (keeps FSDP collectives in step)
            return ref_time
        sums["loss"] += float(out.loss.detach())
        for key in ("clipped", "approx_kl", "ratio", "is_weight", "ref_kl"):
            sums[key] += getattr(out, key)
        if entropy is not None:
            sums["entropy"] += float(entropy.detach().sum())
        sums["update_tokens"] += mb.num_trained
        if count:
            sums["trained_tokens"] += mb.num_trained
            sums["tokens"] += mb.num_tokens
            sums["computed_tokens"] += mb.computed_tokens
            sums["padding_tokens"] += mb.padding_tokens
        return ref_time

    def _optimizer_step(self) -> float:
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grads = [p.grad for p in params if p.grad is not None]
        if self.config.grad_clip is not None:
            norm = self.dist.grad_norm(torch.nn.utils.clip_grad_norm_(params, self.config.grad_clip))
        else:
            norm = self.dist.grad_norm(torch.nn.utils.get_total_norm(grads)) if grads else 0.0
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    @torch.no_grad()
    def _reference_logprobs(self, mb: Any) -> torch.Tensor:
        if self.ref_model is not None:
            return token_logprobs(self.ref_model, mb, self.device, self.autocast_dtype)[0]
        with self.model.disable_adapter():  # type: ignore[operator]  # LoRA (peft): the base is the reference
            return token_logprobs(self.model, mb, self.device, self.autocast_dtype)[0]

    def _metrics(self, tb: TrainBatch, samples: list[Sample], sums: dict[str, float], n_mb: int,
                 grad_norms: list[float], updates: int) -> dict[str, Any]:
        # diagnostics are means over every update's tokens; token counts are the batch's, counted once
        n_tok = max(sums["update_tokens"], 1)
        rewards = list(tb.rewards.values())
        advs = list(tb.advantages.values()) or [s.advantage for s in samples]
        rollouts = {s.rollout_id for s in samples}
        m: dict[str, Any] = {
            "step": self.step_count,
            "policy_version": self.policy_version,
            "loss": sums["loss"] / max(updates, 1),  # each update's loss weighs its tokens to a sum of 1
            "clip_fraction": sums["clipped"] / n_tok,
            "approx_kl": sums["approx_kl"] / n_tok,
            "ratio_mean": sums["ratio"] / n_tok,
            "is_weight_mean": sums["is_weight"] / n_tok,
            "ref_kl": sums["ref_kl"] / n_tok,
            "entropy": sums["entropy"] / n_tok,
            "grad_norm": statistics.fmean(grad_norms) if grad_norms else 0.0,
            "grad_norm/last": grad_norms[-1] if grad_norms else 0.0,
            "updates": updates,
            "lr": self.optimizer.param_groups[0]["lr"],
            "reward/mean": statistics.fmean(rewards) if rewards else float("nan"),
            "reward/std": statistics.pstdev(rewards) if rewards else float("nan"),
            "advantage/mean": statistics.fmean(advs) if advs else float("nan"),
            "advantage/std": statistics.pstdev(advs) if advs else float("nan"),
            "advantage/min": min(advs, default=float("nan")),
            "advantage/max": max(advs, default=float("nan")),
            "tokens/total": sums["tokens"],
            "tokens/trained": sums["trained_tokens"],
            "tokens/computed": sums["computed_tokens"],
            "tokens/padding": sums["padding_tokens"],
            "tokens/shared_prefix_saved": sums["tokens"] - (sums["computed_tokens"] - sums["padding_tokens"]),
            "samples/count": len(samples),
            "samples/rollouts": len(rollouts),
            "samples/per_rollout": len(samples) / max(len(rollouts), 1),
            "micro_batches": n_mb,
            "skipped": int(sums["trained_tokens"] == 0),
        }
        peak = peak_rss_bytes()
        if peak is not None:
            m["memory/peak_rss_gb"] = peak / 2**30  # the whole process (engine too, when embedded)
        m.update({f"count/{k}": v for k, v in sorted(tb.counts.items())})
        for fidelity, n in Counter(s.fidelity.value for s in samples).items():
            m[f"samples/{fidelity}"] = n
        return m

    # -- publishing and checkpoints -----------------------------------------------------------------
    def publish(self) -> int:
        """Hand the current weights to the publisher as the next policy version; record it in the store."""
        version = self.policy_version + 1
        path = None
        with self.dist.full_model(self.model) as full:  # FSDP: every rank gathers, rank 0 publishes
            if self.publisher is not None and self.dist.is_main:
                path = self.publisher.publish(full, version)
        if self.store is not None and self.dist.is_main:
            record_policy_version(self.store, version, path, run_id=self.run_id, step=self.step_count)
        self.policy_version = version
        return version

    def save_checkpoint(self, path: str | Path | None = None) -> Path:
        if path is None:
            if self.run_dir is None:
                raise ValueError("save_checkpoint needs a path when the trainer has no run_dir")
            path = checkpoint_dir(self.run_dir, self.step_count)
        state = {"step": self.step_count, "updating_steps": self.updating_steps,
                 "policy_version": self.policy_version, "config": self.config.model_dump(mode="json")}
        if not self.dist.enabled:
            return ckpt.save_checkpoint(path, self.model, self.optimizer, state)
        optim = self.dist.full_optimizer_state(self.model, self.optimizer)  # collective, then rank 0 writes
        full = self.dist.full_state_dict(self.model)
        if self.dist.is_main:
            trained = {n: full[n] for n, p in self.model.named_parameters() if p.requires_grad}
            ckpt.save_checkpoint(path, self.model, self.optimizer, state, tensors=trained, optimizer_state=optim)
        self.dist.barrier()
        return Path(path)

    def load_checkpoint(self, path: str | Path) -> None:
        def shard(tensors: dict[str, torch.Tensor], optim: dict[str, Any]) -> None:
            self.dist.load_full_state(self.model, self.optimizer, tensors, optim)

        # FSDP: every rank reads the (shared) path and keeps its own shard
        state = ckpt.load_checkpoint(path, self.model, self.optimizer, shard if self.dist.enabled else None)
        # The optimizer's moments resume; its settings are this run's config, not the checkpoint's (a run
        # resumed with another lr must train at that lr: load_state_dict restores the saved one).
        cfg = self.config
        for group in self.optimizer.param_groups:
            if group.get("lr") != cfg.lr:
                logger.info("resumed optimizer: lr %s -> %s (this run's [training] lr)", group.get("lr"), cfg.lr)
            group.update(lr=cfg.lr, weight_decay=cfg.weight_decay, betas=tuple(cfg.betas))
        self.step_count = int(state["step"])
        self.updating_steps = int(state.get("updating_steps", self.step_count))  # older checkpoints: every step
        self.policy_version = int(state["policy_version"])

    def close(self, failed: bool = False) -> None:
        """Close the metrics and trackers; ``failed`` marks the tracker runs as failed, not finished."""
        if self.metrics is not None:
            self.metrics.close(failed)
